from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.get_profile_response_401 import GetProfileResponse401
from ...models.get_profile_response_403 import GetProfileResponse403
from ...models.get_profile_response_404 import GetProfileResponse404
from ...models.get_profile_response_431 import GetProfileResponse431
from ...models.get_profile_response_500 import GetProfileResponse500
from ...models.get_profile_response_503 import GetProfileResponse503
from ...models.profile_response import ProfileResponse
from ...types import Response


def _get_kwargs() -> dict[str, Any]:

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/api/account/profile",
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> (
    GetProfileResponse401
    | GetProfileResponse403
    | GetProfileResponse404
    | GetProfileResponse431
    | GetProfileResponse500
    | GetProfileResponse503
    | ProfileResponse
    | None
):
    if response.status_code == 200:
        response_200 = ProfileResponse.from_dict(response.json())

        return response_200

    if response.status_code == 401:
        response_401 = GetProfileResponse401.from_dict(response.json())

        return response_401

    if response.status_code == 403:
        response_403 = GetProfileResponse403.from_dict(response.json())

        return response_403

    if response.status_code == 404:
        response_404 = GetProfileResponse404.from_dict(response.json())

        return response_404

    if response.status_code == 431:
        response_431 = GetProfileResponse431.from_dict(response.json())

        return response_431

    if response.status_code == 500:
        response_500 = GetProfileResponse500.from_dict(response.json())

        return response_500

    if response.status_code == 503:
        response_503 = GetProfileResponse503.from_dict(response.json())

        return response_503

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[
    GetProfileResponse401
    | GetProfileResponse403
    | GetProfileResponse404
    | GetProfileResponse431
    | GetProfileResponse500
    | GetProfileResponse503
    | ProfileResponse
]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
) -> Response[
    GetProfileResponse401
    | GetProfileResponse403
    | GetProfileResponse404
    | GetProfileResponse431
    | GetProfileResponse500
    | GetProfileResponse503
    | ProfileResponse
]:
    """Read the caller's profile

     The caller's email, display name, time zone and marketing consent, with when they last changed. `404
    not_found` when the user was erased meanwhile.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[GetProfileResponse401 | GetProfileResponse403 | GetProfileResponse404 | GetProfileResponse431 | GetProfileResponse500 | GetProfileResponse503 | ProfileResponse]
    """

    kwargs = _get_kwargs()

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient,
) -> (
    GetProfileResponse401
    | GetProfileResponse403
    | GetProfileResponse404
    | GetProfileResponse431
    | GetProfileResponse500
    | GetProfileResponse503
    | ProfileResponse
    | None
):
    """Read the caller's profile

     The caller's email, display name, time zone and marketing consent, with when they last changed. `404
    not_found` when the user was erased meanwhile.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        GetProfileResponse401 | GetProfileResponse403 | GetProfileResponse404 | GetProfileResponse431 | GetProfileResponse500 | GetProfileResponse503 | ProfileResponse
    """

    return sync_detailed(
        client=client,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
) -> Response[
    GetProfileResponse401
    | GetProfileResponse403
    | GetProfileResponse404
    | GetProfileResponse431
    | GetProfileResponse500
    | GetProfileResponse503
    | ProfileResponse
]:
    """Read the caller's profile

     The caller's email, display name, time zone and marketing consent, with when they last changed. `404
    not_found` when the user was erased meanwhile.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[GetProfileResponse401 | GetProfileResponse403 | GetProfileResponse404 | GetProfileResponse431 | GetProfileResponse500 | GetProfileResponse503 | ProfileResponse]
    """

    kwargs = _get_kwargs()

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
) -> (
    GetProfileResponse401
    | GetProfileResponse403
    | GetProfileResponse404
    | GetProfileResponse431
    | GetProfileResponse500
    | GetProfileResponse503
    | ProfileResponse
    | None
):
    """Read the caller's profile

     The caller's email, display name, time zone and marketing consent, with when they last changed. `404
    not_found` when the user was erased meanwhile.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        GetProfileResponse401 | GetProfileResponse403 | GetProfileResponse404 | GetProfileResponse431 | GetProfileResponse500 | GetProfileResponse503 | ProfileResponse
    """

    return (
        await asyncio_detailed(
            client=client,
        )
    ).parsed
