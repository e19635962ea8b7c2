from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error_body import ErrorBody
from ...models.health_response import HealthResponse
from ...types import Response


def _get_kwargs() -> dict[str, Any]:

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/readyz",
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> ErrorBody | HealthResponse | None:
    if response.status_code == 200:
        response_200 = HealthResponse.from_dict(response.json())

        return response_200

    if response.status_code == 431:
        response_431 = ErrorBody.from_dict(response.json())

        return response_431

    if response.status_code == 500:
        response_500 = ErrorBody.from_dict(response.json())

        return response_500

    if response.status_code == 503:
        response_503 = HealthResponse.from_dict(response.json())

        return response_503

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[ErrorBody | HealthResponse]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient | Client,
) -> Response[ErrorBody | HealthResponse]:
    """Readiness probe

     `200` when both the database and the idempotency store answer within a second, else `503`; `checks`
    says which one did not. Also `503` while the process shuts down. Each is asked on a connection of
    its own (`ApiState::readiness`), never one of the request pools: a replica whose pools are all busy
    is still ready. For load balancers and orchestrators, not for apps.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | HealthResponse]
    """

    kwargs = _get_kwargs()

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient | Client,
) -> ErrorBody | HealthResponse | None:
    """Readiness probe

     `200` when both the database and the idempotency store answer within a second, else `503`; `checks`
    says which one did not. Also `503` while the process shuts down. Each is asked on a connection of
    its own (`ApiState::readiness`), never one of the request pools: a replica whose pools are all busy
    is still ready. For load balancers and orchestrators, not for apps.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | HealthResponse
    """

    return sync_detailed(
        client=client,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient | Client,
) -> Response[ErrorBody | HealthResponse]:
    """Readiness probe

     `200` when both the database and the idempotency store answer within a second, else `503`; `checks`
    says which one did not. Also `503` while the process shuts down. Each is asked on a connection of
    its own (`ApiState::readiness`), never one of the request pools: a replica whose pools are all busy
    is still ready. For load balancers and orchestrators, not for apps.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | HealthResponse]
    """

    kwargs = _get_kwargs()

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient | Client,
) -> ErrorBody | HealthResponse | None:
    """Readiness probe

     `200` when both the database and the idempotency store answer within a second, else `503`; `checks`
    says which one did not. Also `503` while the process shuts down. Each is asked on a connection of
    its own (`ApiState::readiness`), never one of the request pools: a replica whose pools are all busy
    is still ready. For load balancers and orchestrators, not for apps.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | HealthResponse
    """

    return (
        await asyncio_detailed(
            client=client,
        )
    ).parsed
