from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error_body import ErrorBody
from ...types import UNSET, Response, Unset


def _get_kwargs(
    *,
    last_event_id: None | str | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    if not isinstance(last_event_id, Unset):
        headers["Last-Event-ID"] = last_event_id

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/api/trading/stream",
    }

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> ErrorBody | None:
    if response.status_code == 401:
        response_401 = ErrorBody.from_dict(response.json())

        return response_401

    if response.status_code == 403:
        response_403 = ErrorBody.from_dict(response.json())

        return response_403

    if response.status_code == 410:
        response_410 = ErrorBody.from_dict(response.json())

        return response_410

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
) -> Response[ErrorBody]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    last_event_id: None | str | Unset = UNSET,
) -> Response[ErrorBody]:
    """Stream trade updates

     The user's trade updates as server-sent events, each a `TradeUpdate` with its order. Ids increase:
    send the last as `Last-Event-ID` to resume with no gap and no duplicate. `410 stream_history_gone`
    when it names no event still kept; `429 rate_limited` past 5 streams of the user; `503
    too_many_connections` when the server is full. A comment comes every 15 s; a reader whose socket
    takes nothing for 60 s is dropped.

    Args:
        last_event_id (None | str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody]
    """

    kwargs = _get_kwargs(
        last_event_id=last_event_id,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient,
    last_event_id: None | str | Unset = UNSET,
) -> ErrorBody | None:
    """Stream trade updates

     The user's trade updates as server-sent events, each a `TradeUpdate` with its order. Ids increase:
    send the last as `Last-Event-ID` to resume with no gap and no duplicate. `410 stream_history_gone`
    when it names no event still kept; `429 rate_limited` past 5 streams of the user; `503
    too_many_connections` when the server is full. A comment comes every 15 s; a reader whose socket
    takes nothing for 60 s is dropped.

    Args:
        last_event_id (None | str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody
    """

    return sync_detailed(
        client=client,
        last_event_id=last_event_id,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    last_event_id: None | str | Unset = UNSET,
) -> Response[ErrorBody]:
    """Stream trade updates

     The user's trade updates as server-sent events, each a `TradeUpdate` with its order. Ids increase:
    send the last as `Last-Event-ID` to resume with no gap and no duplicate. `410 stream_history_gone`
    when it names no event still kept; `429 rate_limited` past 5 streams of the user; `503
    too_many_connections` when the server is full. A comment comes every 15 s; a reader whose socket
    takes nothing for 60 s is dropped.

    Args:
        last_event_id (None | str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody]
    """

    kwargs = _get_kwargs(
        last_event_id=last_event_id,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    last_event_id: None | str | Unset = UNSET,
) -> ErrorBody | None:
    """Stream trade updates

     The user's trade updates as server-sent events, each a `TradeUpdate` with its order. Ids increase:
    send the last as `Last-Event-ID` to resume with no gap and no duplicate. `410 stream_history_gone`
    when it names no event still kept; `429 rate_limited` past 5 streams of the user; `503
    too_many_connections` when the server is full. A comment comes every 15 s; a reader whose socket
    takes nothing for 60 s is dropped.

    Args:
        last_event_id (None | str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody
    """

    return (
        await asyncio_detailed(
            client=client,
            last_event_id=last_event_id,
        )
    ).parsed
