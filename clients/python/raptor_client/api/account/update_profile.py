from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.profile_patch import ProfilePatch
from ...models.profile_response import ProfileResponse
from ...models.update_profile_response_400 import UpdateProfileResponse400
from ...models.update_profile_response_401 import UpdateProfileResponse401
from ...models.update_profile_response_403 import UpdateProfileResponse403
from ...models.update_profile_response_404 import UpdateProfileResponse404
from ...models.update_profile_response_409 import UpdateProfileResponse409
from ...models.update_profile_response_413 import UpdateProfileResponse413
from ...models.update_profile_response_415 import UpdateProfileResponse415
from ...models.update_profile_response_422 import UpdateProfileResponse422
from ...models.update_profile_response_431 import UpdateProfileResponse431
from ...models.update_profile_response_500 import UpdateProfileResponse500
from ...models.update_profile_response_503 import UpdateProfileResponse503
from ...types import UNSET, Response, Unset


def _get_kwargs(
    *,
    body: ProfilePatch | Unset = UNSET,
    idempotency_key: str | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    if not isinstance(idempotency_key, Unset):
        headers["Idempotency-Key"] = idempotency_key

    _kwargs: dict[str, Any] = {
        "method": "patch",
        "url": "/api/account/profile",
    }

    if not isinstance(body, Unset):
        _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> (
    ProfileResponse
    | UpdateProfileResponse400
    | UpdateProfileResponse401
    | UpdateProfileResponse403
    | UpdateProfileResponse404
    | UpdateProfileResponse409
    | UpdateProfileResponse413
    | UpdateProfileResponse415
    | UpdateProfileResponse422
    | UpdateProfileResponse431
    | UpdateProfileResponse500
    | UpdateProfileResponse503
    | None
):
    if response.status_code == 200:
        response_200 = ProfileResponse.from_dict(response.json())

        return response_200

    if response.status_code == 400:
        response_400 = UpdateProfileResponse400.from_dict(response.json())

        return response_400

    if response.status_code == 401:
        response_401 = UpdateProfileResponse401.from_dict(response.json())

        return response_401

    if response.status_code == 403:
        response_403 = UpdateProfileResponse403.from_dict(response.json())

        return response_403

    if response.status_code == 404:
        response_404 = UpdateProfileResponse404.from_dict(response.json())

        return response_404

    if response.status_code == 409:
        response_409 = UpdateProfileResponse409.from_dict(response.json())

        return response_409

    if response.status_code == 413:
        response_413 = UpdateProfileResponse413.from_dict(response.json())

        return response_413

    if response.status_code == 415:
        response_415 = UpdateProfileResponse415.from_dict(response.json())

        return response_415

    if response.status_code == 422:
        response_422 = UpdateProfileResponse422.from_dict(response.json())

        return response_422

    if response.status_code == 431:
        response_431 = UpdateProfileResponse431.from_dict(response.json())

        return response_431

    if response.status_code == 500:
        response_500 = UpdateProfileResponse500.from_dict(response.json())

        return response_500

    if response.status_code == 503:
        response_503 = UpdateProfileResponse503.from_dict(response.json())

        return response_503

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[
    ProfileResponse
    | UpdateProfileResponse400
    | UpdateProfileResponse401
    | UpdateProfileResponse403
    | UpdateProfileResponse404
    | UpdateProfileResponse409
    | UpdateProfileResponse413
    | UpdateProfileResponse415
    | UpdateProfileResponse422
    | UpdateProfileResponse431
    | UpdateProfileResponse500
    | UpdateProfileResponse503
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
    body: ProfilePatch | Unset = UNSET,
    idempotency_key: str | Unset = UNSET,
) -> Response[
    ProfileResponse
    | UpdateProfileResponse400
    | UpdateProfileResponse401
    | UpdateProfileResponse403
    | UpdateProfileResponse404
    | UpdateProfileResponse409
    | UpdateProfileResponse413
    | UpdateProfileResponse415
    | UpdateProfileResponse422
    | UpdateProfileResponse431
    | UpdateProfileResponse500
    | UpdateProfileResponse503
]:
    """Change the caller's profile

     Only the fields sent change; `null` clears `display_name` or `time_zone`. Tier 2 (fail-open, keys
    kept 7 days). The answer is personal data, so it is never stored: a retry with the same key runs the
    patch again and answers the profile as it is then. `422 invalid_display_name`, `invalid_time_zone`
    or `invalid_marketing_opt_in` for a bad value.

    Args:
        idempotency_key (str | Unset):
        body (ProfilePatch | Unset): `PATCH /api/account/profile`: every field optional; `null`
            clears `display_name` and
            `time_zone`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ProfileResponse | UpdateProfileResponse400 | UpdateProfileResponse401 | UpdateProfileResponse403 | UpdateProfileResponse404 | UpdateProfileResponse409 | UpdateProfileResponse413 | UpdateProfileResponse415 | UpdateProfileResponse422 | UpdateProfileResponse431 | UpdateProfileResponse500 | UpdateProfileResponse503]
    """

    kwargs = _get_kwargs(
        body=body,
        idempotency_key=idempotency_key,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient,
    body: ProfilePatch | Unset = UNSET,
    idempotency_key: str | Unset = UNSET,
) -> (
    ProfileResponse
    | UpdateProfileResponse400
    | UpdateProfileResponse401
    | UpdateProfileResponse403
    | UpdateProfileResponse404
    | UpdateProfileResponse409
    | UpdateProfileResponse413
    | UpdateProfileResponse415
    | UpdateProfileResponse422
    | UpdateProfileResponse431
    | UpdateProfileResponse500
    | UpdateProfileResponse503
    | None
):
    """Change the caller's profile

     Only the fields sent change; `null` clears `display_name` or `time_zone`. Tier 2 (fail-open, keys
    kept 7 days). The answer is personal data, so it is never stored: a retry with the same key runs the
    patch again and answers the profile as it is then. `422 invalid_display_name`, `invalid_time_zone`
    or `invalid_marketing_opt_in` for a bad value.

    Args:
        idempotency_key (str | Unset):
        body (ProfilePatch | Unset): `PATCH /api/account/profile`: every field optional; `null`
            clears `display_name` and
            `time_zone`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ProfileResponse | UpdateProfileResponse400 | UpdateProfileResponse401 | UpdateProfileResponse403 | UpdateProfileResponse404 | UpdateProfileResponse409 | UpdateProfileResponse413 | UpdateProfileResponse415 | UpdateProfileResponse422 | UpdateProfileResponse431 | UpdateProfileResponse500 | UpdateProfileResponse503
    """

    return sync_detailed(
        client=client,
        body=body,
        idempotency_key=idempotency_key,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    body: ProfilePatch | Unset = UNSET,
    idempotency_key: str | Unset = UNSET,
) -> Response[
    ProfileResponse
    | UpdateProfileResponse400
    | UpdateProfileResponse401
    | UpdateProfileResponse403
    | UpdateProfileResponse404
    | UpdateProfileResponse409
    | UpdateProfileResponse413
    | UpdateProfileResponse415
    | UpdateProfileResponse422
    | UpdateProfileResponse431
    | UpdateProfileResponse500
    | UpdateProfileResponse503
]:
    """Change the caller's profile

     Only the fields sent change; `null` clears `display_name` or `time_zone`. Tier 2 (fail-open, keys
    kept 7 days). The answer is personal data, so it is never stored: a retry with the same key runs the
    patch again and answers the profile as it is then. `422 invalid_display_name`, `invalid_time_zone`
    or `invalid_marketing_opt_in` for a bad value.

    Args:
        idempotency_key (str | Unset):
        body (ProfilePatch | Unset): `PATCH /api/account/profile`: every field optional; `null`
            clears `display_name` and
            `time_zone`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ProfileResponse | UpdateProfileResponse400 | UpdateProfileResponse401 | UpdateProfileResponse403 | UpdateProfileResponse404 | UpdateProfileResponse409 | UpdateProfileResponse413 | UpdateProfileResponse415 | UpdateProfileResponse422 | UpdateProfileResponse431 | UpdateProfileResponse500 | UpdateProfileResponse503]
    """

    kwargs = _get_kwargs(
        body=body,
        idempotency_key=idempotency_key,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    body: ProfilePatch | Unset = UNSET,
    idempotency_key: str | Unset = UNSET,
) -> (
    ProfileResponse
    | UpdateProfileResponse400
    | UpdateProfileResponse401
    | UpdateProfileResponse403
    | UpdateProfileResponse404
    | UpdateProfileResponse409
    | UpdateProfileResponse413
    | UpdateProfileResponse415
    | UpdateProfileResponse422
    | UpdateProfileResponse431
    | UpdateProfileResponse500
    | UpdateProfileResponse503
    | None
):
    """Change the caller's profile

     Only the fields sent change; `null` clears `display_name` or `time_zone`. Tier 2 (fail-open, keys
    kept 7 days). The answer is personal data, so it is never stored: a retry with the same key runs the
    patch again and answers the profile as it is then. `422 invalid_display_name`, `invalid_time_zone`
    or `invalid_marketing_opt_in` for a bad value.

    Args:
        idempotency_key (str | Unset):
        body (ProfilePatch | Unset): `PATCH /api/account/profile`: every field optional; `null`
            clears `display_name` and
            `time_zone`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ProfileResponse | UpdateProfileResponse400 | UpdateProfileResponse401 | UpdateProfileResponse403 | UpdateProfileResponse404 | UpdateProfileResponse409 | UpdateProfileResponse413 | UpdateProfileResponse415 | UpdateProfileResponse422 | UpdateProfileResponse431 | UpdateProfileResponse500 | UpdateProfileResponse503
    """

    return (
        await asyncio_detailed(
            client=client,
            body=body,
            idempotency_key=idempotency_key,
        )
    ).parsed
