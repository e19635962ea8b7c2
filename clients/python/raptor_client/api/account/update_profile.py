from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error_body import ErrorBody
from ...models.profile_patch import ProfilePatch
from ...models.profile_response import ProfileResponse
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
) -> ErrorBody | ProfileResponse | None:
    if response.status_code == 200:
        response_200 = ProfileResponse.from_dict(response.json())

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
) -> Response[ErrorBody | ProfileResponse]:
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
) -> Response[ErrorBody | ProfileResponse]:
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
        Response[ErrorBody | ProfileResponse]
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
) -> ErrorBody | ProfileResponse | None:
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
        ErrorBody | ProfileResponse
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
) -> Response[ErrorBody | ProfileResponse]:
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
        Response[ErrorBody | ProfileResponse]
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
) -> ErrorBody | ProfileResponse | None:
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
        ErrorBody | ProfileResponse
    """

    return (
        await asyncio_detailed(
            client=client,
            body=body,
            idempotency_key=idempotency_key,
        )
    ).parsed
