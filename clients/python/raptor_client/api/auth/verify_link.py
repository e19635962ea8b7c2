from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error_body import ErrorBody
from ...models.session_response import SessionResponse
from ...models.verify_request import VerifyRequest
from ...types import Response


def _get_kwargs(
    *,
    body: VerifyRequest,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/api/auth/register/verify-with-token",
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> ErrorBody | SessionResponse | None:
    if response.status_code == 200:
        response_200 = SessionResponse.from_dict(response.json())

        return response_200

    if response.status_code == 400:
        response_400 = ErrorBody.from_dict(response.json())

        return response_400

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
) -> Response[ErrorBody | SessionResponse]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient | Client,
    body: VerifyRequest,
) -> Response[ErrorBody | SessionResponse]:
    """Exchange an emailed link's token for a session

     Verifies a sign-up or login link: a session, and on the first use of a sign-up link a new user with
    a paper account. A repeat within 15 minutes answers the same session, so whichever answer the app
    keeps works; after that, or after logout of that session, the link is spent (`400 invalid_token`,
    also for an unknown or expired token). Never creates a second user for one address.

    Args:
        body (VerifyRequest): `POST /api/auth/register/verify-with-token`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | SessionResponse]
    """

    kwargs = _get_kwargs(
        body=body,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient | Client,
    body: VerifyRequest,
) -> ErrorBody | SessionResponse | None:
    """Exchange an emailed link's token for a session

     Verifies a sign-up or login link: a session, and on the first use of a sign-up link a new user with
    a paper account. A repeat within 15 minutes answers the same session, so whichever answer the app
    keeps works; after that, or after logout of that session, the link is spent (`400 invalid_token`,
    also for an unknown or expired token). Never creates a second user for one address.

    Args:
        body (VerifyRequest): `POST /api/auth/register/verify-with-token`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | SessionResponse
    """

    return sync_detailed(
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient | Client,
    body: VerifyRequest,
) -> Response[ErrorBody | SessionResponse]:
    """Exchange an emailed link's token for a session

     Verifies a sign-up or login link: a session, and on the first use of a sign-up link a new user with
    a paper account. A repeat within 15 minutes answers the same session, so whichever answer the app
    keeps works; after that, or after logout of that session, the link is spent (`400 invalid_token`,
    also for an unknown or expired token). Never creates a second user for one address.

    Args:
        body (VerifyRequest): `POST /api/auth/register/verify-with-token`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | SessionResponse]
    """

    kwargs = _get_kwargs(
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient | Client,
    body: VerifyRequest,
) -> ErrorBody | SessionResponse | None:
    """Exchange an emailed link's token for a session

     Verifies a sign-up or login link: a session, and on the first use of a sign-up link a new user with
    a paper account. A repeat within 15 minutes answers the same session, so whichever answer the app
    keeps works; after that, or after logout of that session, the link is spent (`400 invalid_token`,
    also for an unknown or expired token). Never creates a second user for one address.

    Args:
        body (VerifyRequest): `POST /api/auth/register/verify-with-token`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | SessionResponse
    """

    return (
        await asyncio_detailed(
            client=client,
            body=body,
        )
    ).parsed
