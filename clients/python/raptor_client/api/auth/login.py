from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.accepted_response import AcceptedResponse
from ...models.email_request import EmailRequest
from ...models.error_body import ErrorBody
from ...types import Response


def _get_kwargs(
    *,
    body: EmailRequest,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/api/auth/login",
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> AcceptedResponse | ErrorBody | None:
    if response.status_code == 202:
        response_202 = AcceptedResponse.from_dict(response.json())

        return response_202

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
) -> Response[AcceptedResponse | ErrorBody]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient | Client,
    body: EmailRequest,
) -> Response[AcceptedResponse | ErrorBody]:
    """Request a login link

     Emails a login link (valid 1 hour) to an existing account. Always `202`: for an unknown address
    nothing is sent, so the answer cannot be used to probe for accounts. `422 invalid_email`; `429
    rate_limited` per address and per client IP, like sign-up.

    Args:
        body (EmailRequest): `POST /api/auth/register`, `POST /api/auth/login`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[AcceptedResponse | ErrorBody]
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
    body: EmailRequest,
) -> AcceptedResponse | ErrorBody | None:
    """Request a login link

     Emails a login link (valid 1 hour) to an existing account. Always `202`: for an unknown address
    nothing is sent, so the answer cannot be used to probe for accounts. `422 invalid_email`; `429
    rate_limited` per address and per client IP, like sign-up.

    Args:
        body (EmailRequest): `POST /api/auth/register`, `POST /api/auth/login`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        AcceptedResponse | ErrorBody
    """

    return sync_detailed(
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient | Client,
    body: EmailRequest,
) -> Response[AcceptedResponse | ErrorBody]:
    """Request a login link

     Emails a login link (valid 1 hour) to an existing account. Always `202`: for an unknown address
    nothing is sent, so the answer cannot be used to probe for accounts. `422 invalid_email`; `429
    rate_limited` per address and per client IP, like sign-up.

    Args:
        body (EmailRequest): `POST /api/auth/register`, `POST /api/auth/login`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[AcceptedResponse | ErrorBody]
    """

    kwargs = _get_kwargs(
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient | Client,
    body: EmailRequest,
) -> AcceptedResponse | ErrorBody | None:
    """Request a login link

     Emails a login link (valid 1 hour) to an existing account. Always `202`: for an unknown address
    nothing is sent, so the answer cannot be used to probe for accounts. `422 invalid_email`; `429
    rate_limited` per address and per client IP, like sign-up.

    Args:
        body (EmailRequest): `POST /api/auth/register`, `POST /api/auth/login`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        AcceptedResponse | ErrorBody
    """

    return (
        await asyncio_detailed(
            client=client,
            body=body,
        )
    ).parsed
