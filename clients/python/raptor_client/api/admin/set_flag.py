from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.flag_response import FlagResponse
from ...models.set_flag_request import SetFlagRequest
from ...models.set_flag_response_400 import SetFlagResponse400
from ...models.set_flag_response_401 import SetFlagResponse401
from ...models.set_flag_response_403 import SetFlagResponse403
from ...models.set_flag_response_404 import SetFlagResponse404
from ...models.set_flag_response_413 import SetFlagResponse413
from ...models.set_flag_response_415 import SetFlagResponse415
from ...models.set_flag_response_422 import SetFlagResponse422
from ...models.set_flag_response_431 import SetFlagResponse431
from ...models.set_flag_response_500 import SetFlagResponse500
from ...models.set_flag_response_503 import SetFlagResponse503
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
) -> (
    FlagResponse
    | SetFlagResponse400
    | SetFlagResponse401
    | SetFlagResponse403
    | SetFlagResponse404
    | SetFlagResponse413
    | SetFlagResponse415
    | SetFlagResponse422
    | SetFlagResponse431
    | SetFlagResponse500
    | SetFlagResponse503
    | None
):
    if response.status_code == 200:
        response_200 = FlagResponse.from_dict(response.json())

        return response_200

    if response.status_code == 400:
        response_400 = SetFlagResponse400.from_dict(response.json())

        return response_400

    if response.status_code == 401:
        response_401 = SetFlagResponse401.from_dict(response.json())

        return response_401

    if response.status_code == 403:
        response_403 = SetFlagResponse403.from_dict(response.json())

        return response_403

    if response.status_code == 404:
        response_404 = SetFlagResponse404.from_dict(response.json())

        return response_404

    if response.status_code == 413:
        response_413 = SetFlagResponse413.from_dict(response.json())

        return response_413

    if response.status_code == 415:
        response_415 = SetFlagResponse415.from_dict(response.json())

        return response_415

    if response.status_code == 422:
        response_422 = SetFlagResponse422.from_dict(response.json())

        return response_422

    if response.status_code == 431:
        response_431 = SetFlagResponse431.from_dict(response.json())

        return response_431

    if response.status_code == 500:
        response_500 = SetFlagResponse500.from_dict(response.json())

        return response_500

    if response.status_code == 503:
        response_503 = SetFlagResponse503.from_dict(response.json())

        return response_503

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[
    FlagResponse
    | SetFlagResponse400
    | SetFlagResponse401
    | SetFlagResponse403
    | SetFlagResponse404
    | SetFlagResponse413
    | SetFlagResponse415
    | SetFlagResponse422
    | SetFlagResponse431
    | SetFlagResponse500
    | SetFlagResponse503
]:
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
) -> Response[
    FlagResponse
    | SetFlagResponse400
    | SetFlagResponse401
    | SetFlagResponse403
    | SetFlagResponse404
    | SetFlagResponse413
    | SetFlagResponse415
    | SetFlagResponse422
    | SetFlagResponse431
    | SetFlagResponse500
    | SetFlagResponse503
]:
    """Set a run-time flag (operators)

     Turns a run-time flag on or off. Only `FLAG_IDEMPOTENCY_MIDDLEWARE` is known (`404 not_found` for
    any other name); the new value reaches every server process within one second, without a restart.

    Args:
        name (str):
        body (SetFlagRequest): New value of a flag.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[FlagResponse | SetFlagResponse400 | SetFlagResponse401 | SetFlagResponse403 | SetFlagResponse404 | SetFlagResponse413 | SetFlagResponse415 | SetFlagResponse422 | SetFlagResponse431 | SetFlagResponse500 | SetFlagResponse503]
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
) -> (
    FlagResponse
    | SetFlagResponse400
    | SetFlagResponse401
    | SetFlagResponse403
    | SetFlagResponse404
    | SetFlagResponse413
    | SetFlagResponse415
    | SetFlagResponse422
    | SetFlagResponse431
    | SetFlagResponse500
    | SetFlagResponse503
    | None
):
    """Set a run-time flag (operators)

     Turns a run-time flag on or off. Only `FLAG_IDEMPOTENCY_MIDDLEWARE` is known (`404 not_found` for
    any other name); the new value reaches every server process within one second, without a restart.

    Args:
        name (str):
        body (SetFlagRequest): New value of a flag.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        FlagResponse | SetFlagResponse400 | SetFlagResponse401 | SetFlagResponse403 | SetFlagResponse404 | SetFlagResponse413 | SetFlagResponse415 | SetFlagResponse422 | SetFlagResponse431 | SetFlagResponse500 | SetFlagResponse503
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
) -> Response[
    FlagResponse
    | SetFlagResponse400
    | SetFlagResponse401
    | SetFlagResponse403
    | SetFlagResponse404
    | SetFlagResponse413
    | SetFlagResponse415
    | SetFlagResponse422
    | SetFlagResponse431
    | SetFlagResponse500
    | SetFlagResponse503
]:
    """Set a run-time flag (operators)

     Turns a run-time flag on or off. Only `FLAG_IDEMPOTENCY_MIDDLEWARE` is known (`404 not_found` for
    any other name); the new value reaches every server process within one second, without a restart.

    Args:
        name (str):
        body (SetFlagRequest): New value of a flag.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[FlagResponse | SetFlagResponse400 | SetFlagResponse401 | SetFlagResponse403 | SetFlagResponse404 | SetFlagResponse413 | SetFlagResponse415 | SetFlagResponse422 | SetFlagResponse431 | SetFlagResponse500 | SetFlagResponse503]
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
) -> (
    FlagResponse
    | SetFlagResponse400
    | SetFlagResponse401
    | SetFlagResponse403
    | SetFlagResponse404
    | SetFlagResponse413
    | SetFlagResponse415
    | SetFlagResponse422
    | SetFlagResponse431
    | SetFlagResponse500
    | SetFlagResponse503
    | None
):
    """Set a run-time flag (operators)

     Turns a run-time flag on or off. Only `FLAG_IDEMPOTENCY_MIDDLEWARE` is known (`404 not_found` for
    any other name); the new value reaches every server process within one second, without a restart.

    Args:
        name (str):
        body (SetFlagRequest): New value of a flag.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        FlagResponse | SetFlagResponse400 | SetFlagResponse401 | SetFlagResponse403 | SetFlagResponse404 | SetFlagResponse413 | SetFlagResponse415 | SetFlagResponse422 | SetFlagResponse431 | SetFlagResponse500 | SetFlagResponse503
    """

    return (
        await asyncio_detailed(
            name=name,
            client=client,
            body=body,
        )
    ).parsed
