from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error_body import ErrorBody
from ...models.flag_response import FlagResponse
from ...models.set_flag_request import SetFlagRequest
from ...types import Response


def _get_kwargs(
    name: str,
    *,
    body: SetFlagRequest,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "put",
        "url": "/api/admin/flags/{name}".format(
            name=quote(str(name), safe=""),
        ),
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> ErrorBody | FlagResponse | None:
    if response.status_code == 200:
        response_200 = FlagResponse.from_dict(response.json())

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

    if response.status_code == 413:
        response_413 = ErrorBody.from_dict(response.json())

        return response_413

    if response.status_code == 415:
        response_415 = ErrorBody.from_dict(response.json())

        return response_415

    if response.status_code == 422:
        response_422 = ErrorBody.from_dict(response.json())

        return response_422

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
) -> Response[ErrorBody | FlagResponse]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    name: str,
    *,
    client: AuthenticatedClient,
    body: SetFlagRequest,
) -> Response[ErrorBody | FlagResponse]:
    """Set a run-time flag (operators)

     Turns a run-time flag on or off: `FLAG_IDEMPOTENCY_MIDDLEWARE` (the idempotency kill switch) or
    `MBT_NEW_ORDERS_DISABLED` (the trading halt; on, new orders answer `503 new_orders_disabled`). `404
    not_found` for any other name. Audited; reaches every server process within one second.

    Args:
        name (str):
        body (SetFlagRequest): New value of a flag.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | FlagResponse]
    """

    kwargs = _get_kwargs(
        name=name,
        body=body,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    name: str,
    *,
    client: AuthenticatedClient,
    body: SetFlagRequest,
) -> ErrorBody | FlagResponse | None:
    """Set a run-time flag (operators)

     Turns a run-time flag on or off: `FLAG_IDEMPOTENCY_MIDDLEWARE` (the idempotency kill switch) or
    `MBT_NEW_ORDERS_DISABLED` (the trading halt; on, new orders answer `503 new_orders_disabled`). `404
    not_found` for any other name. Audited; reaches every server process within one second.

    Args:
        name (str):
        body (SetFlagRequest): New value of a flag.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | FlagResponse
    """

    return sync_detailed(
        name=name,
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    name: str,
    *,
    client: AuthenticatedClient,
    body: SetFlagRequest,
) -> Response[ErrorBody | FlagResponse]:
    """Set a run-time flag (operators)

     Turns a run-time flag on or off: `FLAG_IDEMPOTENCY_MIDDLEWARE` (the idempotency kill switch) or
    `MBT_NEW_ORDERS_DISABLED` (the trading halt; on, new orders answer `503 new_orders_disabled`). `404
    not_found` for any other name. Audited; reaches every server process within one second.

    Args:
        name (str):
        body (SetFlagRequest): New value of a flag.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | FlagResponse]
    """

    kwargs = _get_kwargs(
        name=name,
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    name: str,
    *,
    client: AuthenticatedClient,
    body: SetFlagRequest,
) -> ErrorBody | FlagResponse | None:
    """Set a run-time flag (operators)

     Turns a run-time flag on or off: `FLAG_IDEMPOTENCY_MIDDLEWARE` (the idempotency kill switch) or
    `MBT_NEW_ORDERS_DISABLED` (the trading halt; on, new orders answer `503 new_orders_disabled`). `404
    not_found` for any other name. Audited; reaches every server process within one second.

    Args:
        name (str):
        body (SetFlagRequest): New value of a flag.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | FlagResponse
    """

    return (
        await asyncio_detailed(
            name=name,
            client=client,
            body=body,
        )
    ).parsed
