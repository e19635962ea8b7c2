from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.close_position_request import ClosePositionRequest
from ...models.error_body import ErrorBody
from ...models.order_response import OrderResponse
from ...types import UNSET, Response, Unset


def _get_kwargs(
    symbol: str,
    *,
    body: ClosePositionRequest | Unset = UNSET,
    idempotency_key: str | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    if not isinstance(idempotency_key, Unset):
        headers["Idempotency-Key"] = idempotency_key

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/api/trading/positions/{symbol}/close".format(
            symbol=quote(str(symbol), safe=""),
        ),
    }

    if not isinstance(body, Unset):
        _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> ErrorBody | OrderResponse | None:
    if response.status_code == 201:
        response_201 = OrderResponse.from_dict(response.json())

        return response_201

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

    if response.status_code == 409:
        response_409 = ErrorBody.from_dict(response.json())

        return response_409

    if response.status_code == 413:
        response_413 = ErrorBody.from_dict(response.json())

        return response_413

    if response.status_code == 415:
        response_415 = ErrorBody.from_dict(response.json())

        return response_415

    if response.status_code == 422:
        response_422 = ErrorBody.from_dict(response.json())

        return response_422

    if response.status_code == 429:
        response_429 = ErrorBody.from_dict(response.json())

        return response_429

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
) -> Response[ErrorBody | OrderResponse]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    symbol: str,
    *,
    client: AuthenticatedClient,
    body: ClosePositionRequest | Unset = UNSET,
    idempotency_key: str | Unset = UNSET,
) -> Response[ErrorBody | OrderResponse]:
    """Close a position at market

     Closes all of the position (`{}` or no body) or `qty` of it with a market order, buying back a short
    or selling a long. Tier 1 (fail-closed): send an `Idempotency-Key`; a retry with it replays the
    first answer. `404 not_found` without a position in `{symbol}`; `422 invalid_order` for a bad `qty`;
    `422 quote_unavailable` without a usable quote.

    Args:
        symbol (str):
        idempotency_key (str | Unset):
        body (ClosePositionRequest | Unset): `POST /api/trading/positions/{symbol}/close`: `{}`
            closes everything.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | OrderResponse]
    """

    kwargs = _get_kwargs(
        symbol=symbol,
        body=body,
        idempotency_key=idempotency_key,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    symbol: str,
    *,
    client: AuthenticatedClient,
    body: ClosePositionRequest | Unset = UNSET,
    idempotency_key: str | Unset = UNSET,
) -> ErrorBody | OrderResponse | None:
    """Close a position at market

     Closes all of the position (`{}` or no body) or `qty` of it with a market order, buying back a short
    or selling a long. Tier 1 (fail-closed): send an `Idempotency-Key`; a retry with it replays the
    first answer. `404 not_found` without a position in `{symbol}`; `422 invalid_order` for a bad `qty`;
    `422 quote_unavailable` without a usable quote.

    Args:
        symbol (str):
        idempotency_key (str | Unset):
        body (ClosePositionRequest | Unset): `POST /api/trading/positions/{symbol}/close`: `{}`
            closes everything.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | OrderResponse
    """

    return sync_detailed(
        symbol=symbol,
        client=client,
        body=body,
        idempotency_key=idempotency_key,
    ).parsed


async def asyncio_detailed(
    symbol: str,
    *,
    client: AuthenticatedClient,
    body: ClosePositionRequest | Unset = UNSET,
    idempotency_key: str | Unset = UNSET,
) -> Response[ErrorBody | OrderResponse]:
    """Close a position at market

     Closes all of the position (`{}` or no body) or `qty` of it with a market order, buying back a short
    or selling a long. Tier 1 (fail-closed): send an `Idempotency-Key`; a retry with it replays the
    first answer. `404 not_found` without a position in `{symbol}`; `422 invalid_order` for a bad `qty`;
    `422 quote_unavailable` without a usable quote.

    Args:
        symbol (str):
        idempotency_key (str | Unset):
        body (ClosePositionRequest | Unset): `POST /api/trading/positions/{symbol}/close`: `{}`
            closes everything.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | OrderResponse]
    """

    kwargs = _get_kwargs(
        symbol=symbol,
        body=body,
        idempotency_key=idempotency_key,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    symbol: str,
    *,
    client: AuthenticatedClient,
    body: ClosePositionRequest | Unset = UNSET,
    idempotency_key: str | Unset = UNSET,
) -> ErrorBody | OrderResponse | None:
    """Close a position at market

     Closes all of the position (`{}` or no body) or `qty` of it with a market order, buying back a short
    or selling a long. Tier 1 (fail-closed): send an `Idempotency-Key`; a retry with it replays the
    first answer. `404 not_found` without a position in `{symbol}`; `422 invalid_order` for a bad `qty`;
    `422 quote_unavailable` without a usable quote.

    Args:
        symbol (str):
        idempotency_key (str | Unset):
        body (ClosePositionRequest | Unset): `POST /api/trading/positions/{symbol}/close`: `{}`
            closes everything.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | OrderResponse
    """

    return (
        await asyncio_detailed(
            symbol=symbol,
            client=client,
            body=body,
            idempotency_key=idempotency_key,
        )
    ).parsed
