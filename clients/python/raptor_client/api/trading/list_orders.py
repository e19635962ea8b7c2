import datetime
from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error_body import ErrorBody
from ...models.order_list_response import OrderListResponse
from ...models.order_list_status import OrderListStatus
from ...types import UNSET, Response, Unset


def _get_kwargs(
    *,
    status: OrderListStatus | Unset = UNSET,
    limit: int | Unset = UNSET,
    cursor: str | Unset = UNSET,
    symbol: str | Unset = UNSET,
    after: datetime.datetime | Unset = UNSET,
    until: datetime.datetime | Unset = UNSET,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    json_status: str | Unset = UNSET
    if not isinstance(status, Unset):
        json_status = status.value

    params["status"] = json_status

    params["limit"] = limit

    params["cursor"] = cursor

    params["symbol"] = symbol

    json_after: str | Unset = UNSET
    if not isinstance(after, Unset):
        json_after = after.isoformat()
    params["after"] = json_after

    json_until: str | Unset = UNSET
    if not isinstance(until, Unset):
        json_until = until.isoformat()
    params["until"] = json_until

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/api/trading/orders",
        "params": params,
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> ErrorBody | OrderListResponse | None:
    if response.status_code == 200:
        response_200 = OrderListResponse.from_dict(response.json())

        return response_200

    if response.status_code == 400:
        response_400 = ErrorBody.from_dict(response.json())

        return response_400

    if response.status_code == 401:
        response_401 = ErrorBody.from_dict(response.json())

        return response_401

    if response.status_code == 403:
        response_403 = ErrorBody.from_dict(response.json())

        return response_403

    if response.status_code == 404:
        response_404 = ErrorBody.from_dict(response.json())

        return response_404

    if response.status_code == 431:
        response_431 = ErrorBody.from_dict(response.json())

        return response_431

    if response.status_code == 500:
        response_500 = ErrorBody.from_dict(response.json())

        return response_500

    if response.status_code == 503:
        response_503 = ErrorBody.from_dict(response.json())

        return response_503

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[ErrorBody | OrderListResponse]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    status: OrderListStatus | Unset = UNSET,
    limit: int | Unset = UNSET,
    cursor: str | Unset = UNSET,
    symbol: str | Unset = UNSET,
    after: datetime.datetime | Unset = UNSET,
    until: datetime.datetime | Unset = UNSET,
) -> Response[ErrorBody | OrderListResponse]:
    """List the account's orders

     The account's orders, newest first, a page at a time: pass `next_cursor` back as `cursor` for the
    next page (keyset on creation time and id, so orders placed meanwhile neither repeat nor hide older
    ones). Filters: `status`, `symbol`, `after`, `until`. `400 invalid_query` for a bad parameter or
    cursor.

    Args:
        status (OrderListStatus | Unset): Which orders `GET /api/trading/orders` lists.
        limit (int | Unset):
        cursor (str | Unset):
        symbol (str | Unset):
        after (datetime.datetime | Unset):
        until (datetime.datetime | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | OrderListResponse]
    """

    kwargs = _get_kwargs(
        status=status,
        limit=limit,
        cursor=cursor,
        symbol=symbol,
        after=after,
        until=until,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient,
    status: OrderListStatus | Unset = UNSET,
    limit: int | Unset = UNSET,
    cursor: str | Unset = UNSET,
    symbol: str | Unset = UNSET,
    after: datetime.datetime | Unset = UNSET,
    until: datetime.datetime | Unset = UNSET,
) -> ErrorBody | OrderListResponse | None:
    """List the account's orders

     The account's orders, newest first, a page at a time: pass `next_cursor` back as `cursor` for the
    next page (keyset on creation time and id, so orders placed meanwhile neither repeat nor hide older
    ones). Filters: `status`, `symbol`, `after`, `until`. `400 invalid_query` for a bad parameter or
    cursor.

    Args:
        status (OrderListStatus | Unset): Which orders `GET /api/trading/orders` lists.
        limit (int | Unset):
        cursor (str | Unset):
        symbol (str | Unset):
        after (datetime.datetime | Unset):
        until (datetime.datetime | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | OrderListResponse
    """

    return sync_detailed(
        client=client,
        status=status,
        limit=limit,
        cursor=cursor,
        symbol=symbol,
        after=after,
        until=until,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    status: OrderListStatus | Unset = UNSET,
    limit: int | Unset = UNSET,
    cursor: str | Unset = UNSET,
    symbol: str | Unset = UNSET,
    after: datetime.datetime | Unset = UNSET,
    until: datetime.datetime | Unset = UNSET,
) -> Response[ErrorBody | OrderListResponse]:
    """List the account's orders

     The account's orders, newest first, a page at a time: pass `next_cursor` back as `cursor` for the
    next page (keyset on creation time and id, so orders placed meanwhile neither repeat nor hide older
    ones). Filters: `status`, `symbol`, `after`, `until`. `400 invalid_query` for a bad parameter or
    cursor.

    Args:
        status (OrderListStatus | Unset): Which orders `GET /api/trading/orders` lists.
        limit (int | Unset):
        cursor (str | Unset):
        symbol (str | Unset):
        after (datetime.datetime | Unset):
        until (datetime.datetime | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | OrderListResponse]
    """

    kwargs = _get_kwargs(
        status=status,
        limit=limit,
        cursor=cursor,
        symbol=symbol,
        after=after,
        until=until,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    status: OrderListStatus | Unset = UNSET,
    limit: int | Unset = UNSET,
    cursor: str | Unset = UNSET,
    symbol: str | Unset = UNSET,
    after: datetime.datetime | Unset = UNSET,
    until: datetime.datetime | Unset = UNSET,
) -> ErrorBody | OrderListResponse | None:
    """List the account's orders

     The account's orders, newest first, a page at a time: pass `next_cursor` back as `cursor` for the
    next page (keyset on creation time and id, so orders placed meanwhile neither repeat nor hide older
    ones). Filters: `status`, `symbol`, `after`, `until`. `400 invalid_query` for a bad parameter or
    cursor.

    Args:
        status (OrderListStatus | Unset): Which orders `GET /api/trading/orders` lists.
        limit (int | Unset):
        cursor (str | Unset):
        symbol (str | Unset):
        after (datetime.datetime | Unset):
        until (datetime.datetime | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | OrderListResponse
    """

    return (
        await asyncio_detailed(
            client=client,
            status=status,
            limit=limit,
            cursor=cursor,
            symbol=symbol,
            after=after,
            until=until,
        )
    ).parsed
