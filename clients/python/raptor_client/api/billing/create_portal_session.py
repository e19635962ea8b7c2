from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.create_portal_session_request import CreatePortalSessionRequest
from ...models.error_body import ErrorBody
from ...models.portal_session_response import PortalSessionResponse
from ...models.unstored_replay import UnstoredReplay
from ...types import UNSET, Response, Unset


def _get_kwargs(
    *,
    body: CreatePortalSessionRequest,
    idempotency_key: str | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    if not isinstance(idempotency_key, Unset):
        headers["Idempotency-Key"] = idempotency_key

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/api/billing/portal-sessions",
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> ErrorBody | PortalSessionResponse | UnstoredReplay | None:
    if response.status_code == 201:

        def _parse_response_201(data: object) -> PortalSessionResponse | UnstoredReplay:
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                componentsschemas_portal_session_answer_type_0 = (
                    PortalSessionResponse.from_dict(data)
                )

                return componentsschemas_portal_session_answer_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            if not isinstance(data, dict):
                raise TypeError()
            componentsschemas_portal_session_answer_type_1 = UnstoredReplay.from_dict(
                data
            )

            return componentsschemas_portal_session_answer_type_1

        response_201 = _parse_response_201(response.json())

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

    if response.status_code == 502:
        response_502 = ErrorBody.from_dict(response.json())

        return response_502

    if response.status_code == 503:
        response_503 = ErrorBody.from_dict(response.json())

        return response_503

    if response.status_code == 504:
        response_504 = ErrorBody.from_dict(response.json())

        return response_504

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[ErrorBody | PortalSessionResponse | UnstoredReplay]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    body: CreatePortalSessionRequest,
    idempotency_key: str | Unset = UNSET,
) -> Response[ErrorBody | PortalSessionResponse | UnstoredReplay]:
    """Open the Stripe billing portal

     A Stripe Billing Portal session for managing the subscription (the user's Stripe customer is created
    on first use). Its URL signs the user in, so it is never stored: a replay answers `body_stored:
    false`; ask again with a new key. `422 invalid_billing_request` for a bad `return_url`; `502`/`504`
    when Stripe fails; `503 billing_not_configured`.

    Args:
        idempotency_key (str | Unset):
        body (CreatePortalSessionRequest): `POST /api/billing/portal-sessions`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | PortalSessionResponse | UnstoredReplay]
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
    body: CreatePortalSessionRequest,
    idempotency_key: str | Unset = UNSET,
) -> ErrorBody | PortalSessionResponse | UnstoredReplay | None:
    """Open the Stripe billing portal

     A Stripe Billing Portal session for managing the subscription (the user's Stripe customer is created
    on first use). Its URL signs the user in, so it is never stored: a replay answers `body_stored:
    false`; ask again with a new key. `422 invalid_billing_request` for a bad `return_url`; `502`/`504`
    when Stripe fails; `503 billing_not_configured`.

    Args:
        idempotency_key (str | Unset):
        body (CreatePortalSessionRequest): `POST /api/billing/portal-sessions`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | PortalSessionResponse | UnstoredReplay
    """

    return sync_detailed(
        client=client,
        body=body,
        idempotency_key=idempotency_key,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    body: CreatePortalSessionRequest,
    idempotency_key: str | Unset = UNSET,
) -> Response[ErrorBody | PortalSessionResponse | UnstoredReplay]:
    """Open the Stripe billing portal

     A Stripe Billing Portal session for managing the subscription (the user's Stripe customer is created
    on first use). Its URL signs the user in, so it is never stored: a replay answers `body_stored:
    false`; ask again with a new key. `422 invalid_billing_request` for a bad `return_url`; `502`/`504`
    when Stripe fails; `503 billing_not_configured`.

    Args:
        idempotency_key (str | Unset):
        body (CreatePortalSessionRequest): `POST /api/billing/portal-sessions`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | PortalSessionResponse | UnstoredReplay]
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
    body: CreatePortalSessionRequest,
    idempotency_key: str | Unset = UNSET,
) -> ErrorBody | PortalSessionResponse | UnstoredReplay | None:
    """Open the Stripe billing portal

     A Stripe Billing Portal session for managing the subscription (the user's Stripe customer is created
    on first use). Its URL signs the user in, so it is never stored: a replay answers `body_stored:
    false`; ask again with a new key. `422 invalid_billing_request` for a bad `return_url`; `502`/`504`
    when Stripe fails; `503 billing_not_configured`.

    Args:
        idempotency_key (str | Unset):
        body (CreatePortalSessionRequest): `POST /api/billing/portal-sessions`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | PortalSessionResponse | UnstoredReplay
    """

    return (
        await asyncio_detailed(
            client=client,
            body=body,
            idempotency_key=idempotency_key,
        )
    ).parsed
