from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.join_waitlist_response_400 import JoinWaitlistResponse400
from ...models.join_waitlist_response_413 import JoinWaitlistResponse413
from ...models.join_waitlist_response_415 import JoinWaitlistResponse415
from ...models.join_waitlist_response_422 import JoinWaitlistResponse422
from ...models.join_waitlist_response_431 import JoinWaitlistResponse431
from ...models.join_waitlist_response_500 import JoinWaitlistResponse500
from ...models.join_waitlist_response_503 import JoinWaitlistResponse503
from ...models.waitlist_signup_request import WaitlistSignupRequest
from ...models.waitlist_signup_response import WaitlistSignupResponse
from ...types import Response


def _get_kwargs(
    *,
    body: WaitlistSignupRequest,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/api/waitlist/signup",
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> (
    JoinWaitlistResponse400
    | JoinWaitlistResponse413
    | JoinWaitlistResponse415
    | JoinWaitlistResponse422
    | JoinWaitlistResponse431
    | JoinWaitlistResponse500
    | JoinWaitlistResponse503
    | WaitlistSignupResponse
    | None
):
    if response.status_code == 202:
        response_202 = WaitlistSignupResponse.from_dict(response.json())

        return response_202

    if response.status_code == 400:
        response_400 = JoinWaitlistResponse400.from_dict(response.json())

        return response_400

    if response.status_code == 413:
        response_413 = JoinWaitlistResponse413.from_dict(response.json())

        return response_413

    if response.status_code == 415:
        response_415 = JoinWaitlistResponse415.from_dict(response.json())

        return response_415

    if response.status_code == 422:
        response_422 = JoinWaitlistResponse422.from_dict(response.json())

        return response_422

    if response.status_code == 431:
        response_431 = JoinWaitlistResponse431.from_dict(response.json())

        return response_431

    if response.status_code == 500:
        response_500 = JoinWaitlistResponse500.from_dict(response.json())

        return response_500

    if response.status_code == 503:
        response_503 = JoinWaitlistResponse503.from_dict(response.json())

        return response_503

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[
    JoinWaitlistResponse400
    | JoinWaitlistResponse413
    | JoinWaitlistResponse415
    | JoinWaitlistResponse422
    | JoinWaitlistResponse431
    | JoinWaitlistResponse500
    | JoinWaitlistResponse503
    | WaitlistSignupResponse
]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient | Client,
    body: WaitlistSignupRequest,
) -> Response[
    JoinWaitlistResponse400
    | JoinWaitlistResponse413
    | JoinWaitlistResponse415
    | JoinWaitlistResponse422
    | JoinWaitlistResponse431
    | JoinWaitlistResponse500
    | JoinWaitlistResponse503
    | WaitlistSignupResponse
]:
    """Join the waitlist

     Adds an email address to the waitlist. A repeat (any letter case) is `202` again and changes
    nothing, so the answer does not tell whether the address was already there. `422 invalid_email`.

    Args:
        body (WaitlistSignupRequest): `POST /api/waitlist/signup`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[JoinWaitlistResponse400 | JoinWaitlistResponse413 | JoinWaitlistResponse415 | JoinWaitlistResponse422 | JoinWaitlistResponse431 | JoinWaitlistResponse500 | JoinWaitlistResponse503 | WaitlistSignupResponse]
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
    body: WaitlistSignupRequest,
) -> (
    JoinWaitlistResponse400
    | JoinWaitlistResponse413
    | JoinWaitlistResponse415
    | JoinWaitlistResponse422
    | JoinWaitlistResponse431
    | JoinWaitlistResponse500
    | JoinWaitlistResponse503
    | WaitlistSignupResponse
    | None
):
    """Join the waitlist

     Adds an email address to the waitlist. A repeat (any letter case) is `202` again and changes
    nothing, so the answer does not tell whether the address was already there. `422 invalid_email`.

    Args:
        body (WaitlistSignupRequest): `POST /api/waitlist/signup`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        JoinWaitlistResponse400 | JoinWaitlistResponse413 | JoinWaitlistResponse415 | JoinWaitlistResponse422 | JoinWaitlistResponse431 | JoinWaitlistResponse500 | JoinWaitlistResponse503 | WaitlistSignupResponse
    """

    return sync_detailed(
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient | Client,
    body: WaitlistSignupRequest,
) -> Response[
    JoinWaitlistResponse400
    | JoinWaitlistResponse413
    | JoinWaitlistResponse415
    | JoinWaitlistResponse422
    | JoinWaitlistResponse431
    | JoinWaitlistResponse500
    | JoinWaitlistResponse503
    | WaitlistSignupResponse
]:
    """Join the waitlist

     Adds an email address to the waitlist. A repeat (any letter case) is `202` again and changes
    nothing, so the answer does not tell whether the address was already there. `422 invalid_email`.

    Args:
        body (WaitlistSignupRequest): `POST /api/waitlist/signup`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[JoinWaitlistResponse400 | JoinWaitlistResponse413 | JoinWaitlistResponse415 | JoinWaitlistResponse422 | JoinWaitlistResponse431 | JoinWaitlistResponse500 | JoinWaitlistResponse503 | WaitlistSignupResponse]
    """

    kwargs = _get_kwargs(
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient | Client,
    body: WaitlistSignupRequest,
) -> (
    JoinWaitlistResponse400
    | JoinWaitlistResponse413
    | JoinWaitlistResponse415
    | JoinWaitlistResponse422
    | JoinWaitlistResponse431
    | JoinWaitlistResponse500
    | JoinWaitlistResponse503
    | WaitlistSignupResponse
    | None
):
    """Join the waitlist

     Adds an email address to the waitlist. A repeat (any letter case) is `202` again and changes
    nothing, so the answer does not tell whether the address was already there. `422 invalid_email`.

    Args:
        body (WaitlistSignupRequest): `POST /api/waitlist/signup`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        JoinWaitlistResponse400 | JoinWaitlistResponse413 | JoinWaitlistResponse415 | JoinWaitlistResponse422 | JoinWaitlistResponse431 | JoinWaitlistResponse500 | JoinWaitlistResponse503 | WaitlistSignupResponse
    """

    return (
        await asyncio_detailed(
            client=client,
            body=body,
        )
    ).parsed
