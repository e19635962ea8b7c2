from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.activity_list_response import ActivityListResponse
from ...models.list_activities_response_400 import ListActivitiesResponse400
from ...models.list_activities_response_401 import ListActivitiesResponse401
from ...models.list_activities_response_403 import ListActivitiesResponse403
from ...models.list_activities_response_404 import ListActivitiesResponse404
from ...models.list_activities_response_431 import ListActivitiesResponse431
from ...models.list_activities_response_500 import ListActivitiesResponse500
from ...models.list_activities_response_503 import ListActivitiesResponse503
from ...types import UNSET, Response, Unset


def _get_kwargs(
    *,
    limit: int | Unset = UNSET,
    cursor: str | Unset = UNSET,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    params["limit"] = limit

    params["cursor"] = cursor

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/api/trading/activities",
        "params": params,
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> (
    ActivityListResponse
    | ListActivitiesResponse400
    | ListActivitiesResponse401
    | ListActivitiesResponse403
    | ListActivitiesResponse404
    | ListActivitiesResponse431
    | ListActivitiesResponse500
    | ListActivitiesResponse503
    | None
):
    if response.status_code == 200:
        response_200 = ActivityListResponse.from_dict(response.json())

        return response_200

    if response.status_code == 400:
        response_400 = ListActivitiesResponse400.from_dict(response.json())

        return response_400

    if response.status_code == 401:
        response_401 = ListActivitiesResponse401.from_dict(response.json())

        return response_401

    if response.status_code == 403:
        response_403 = ListActivitiesResponse403.from_dict(response.json())

        return response_403

    if response.status_code == 404:
        response_404 = ListActivitiesResponse404.from_dict(response.json())

        return response_404

    if response.status_code == 431:
        response_431 = ListActivitiesResponse431.from_dict(response.json())

        return response_431

    if response.status_code == 500:
        response_500 = ListActivitiesResponse500.from_dict(response.json())

        return response_500

    if response.status_code == 503:
        response_503 = ListActivitiesResponse503.from_dict(response.json())

        return response_503

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[
    ActivityListResponse
    | ListActivitiesResponse400
    | ListActivitiesResponse401
    | ListActivitiesResponse403
    | ListActivitiesResponse404
    | ListActivitiesResponse431
    | ListActivitiesResponse500
    | ListActivitiesResponse503
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
    limit: int | Unset = UNSET,
    cursor: str | Unset = UNSET,
) -> Response[
    ActivityListResponse
    | ListActivitiesResponse400
    | ListActivitiesResponse401
    | ListActivitiesResponse403
    | ListActivitiesResponse404
    | ListActivitiesResponse431
    | ListActivitiesResponse500
    | ListActivitiesResponse503
]:
    """List the account's activities

     The account's feed, newest first, paged like the orders (`limit`, `cursor`): fills, cancels, order
    expiries, option expiries and settlements, and resets, each with its order, symbol, quantity, price,
    cash effect and time. New types may appear: skip unknown ones. `400 invalid_query` for a bad `limit`
    or `cursor`.

    Args:
        limit (int | Unset):
        cursor (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ActivityListResponse | ListActivitiesResponse400 | ListActivitiesResponse401 | ListActivitiesResponse403 | ListActivitiesResponse404 | ListActivitiesResponse431 | ListActivitiesResponse500 | ListActivitiesResponse503]
    """

    kwargs = _get_kwargs(
        limit=limit,
        cursor=cursor,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient,
    limit: int | Unset = UNSET,
    cursor: str | Unset = UNSET,
) -> (
    ActivityListResponse
    | ListActivitiesResponse400
    | ListActivitiesResponse401
    | ListActivitiesResponse403
    | ListActivitiesResponse404
    | ListActivitiesResponse431
    | ListActivitiesResponse500
    | ListActivitiesResponse503
    | None
):
    """List the account's activities

     The account's feed, newest first, paged like the orders (`limit`, `cursor`): fills, cancels, order
    expiries, option expiries and settlements, and resets, each with its order, symbol, quantity, price,
    cash effect and time. New types may appear: skip unknown ones. `400 invalid_query` for a bad `limit`
    or `cursor`.

    Args:
        limit (int | Unset):
        cursor (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ActivityListResponse | ListActivitiesResponse400 | ListActivitiesResponse401 | ListActivitiesResponse403 | ListActivitiesResponse404 | ListActivitiesResponse431 | ListActivitiesResponse500 | ListActivitiesResponse503
    """

    return sync_detailed(
        client=client,
        limit=limit,
        cursor=cursor,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    limit: int | Unset = UNSET,
    cursor: str | Unset = UNSET,
) -> Response[
    ActivityListResponse
    | ListActivitiesResponse400
    | ListActivitiesResponse401
    | ListActivitiesResponse403
    | ListActivitiesResponse404
    | ListActivitiesResponse431
    | ListActivitiesResponse500
    | ListActivitiesResponse503
]:
    """List the account's activities

     The account's feed, newest first, paged like the orders (`limit`, `cursor`): fills, cancels, order
    expiries, option expiries and settlements, and resets, each with its order, symbol, quantity, price,
    cash effect and time. New types may appear: skip unknown ones. `400 invalid_query` for a bad `limit`
    or `cursor`.

    Args:
        limit (int | Unset):
        cursor (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ActivityListResponse | ListActivitiesResponse400 | ListActivitiesResponse401 | ListActivitiesResponse403 | ListActivitiesResponse404 | ListActivitiesResponse431 | ListActivitiesResponse500 | ListActivitiesResponse503]
    """

    kwargs = _get_kwargs(
        limit=limit,
        cursor=cursor,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    limit: int | Unset = UNSET,
    cursor: str | Unset = UNSET,
) -> (
    ActivityListResponse
    | ListActivitiesResponse400
    | ListActivitiesResponse401
    | ListActivitiesResponse403
    | ListActivitiesResponse404
    | ListActivitiesResponse431
    | ListActivitiesResponse500
    | ListActivitiesResponse503
    | None
):
    """List the account's activities

     The account's feed, newest first, paged like the orders (`limit`, `cursor`): fills, cancels, order
    expiries, option expiries and settlements, and resets, each with its order, symbol, quantity, price,
    cash effect and time. New types may appear: skip unknown ones. `400 invalid_query` for a bad `limit`
    or `cursor`.

    Args:
        limit (int | Unset):
        cursor (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ActivityListResponse | ListActivitiesResponse400 | ListActivitiesResponse401 | ListActivitiesResponse403 | ListActivitiesResponse404 | ListActivitiesResponse431 | ListActivitiesResponse500 | ListActivitiesResponse503
    """

    return (
        await asyncio_detailed(
            client=client,
            limit=limit,
            cursor=cursor,
        )
    ).parsed
