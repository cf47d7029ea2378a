"""Reaching a Chroma server as chromadb's HttpClient offers it, through the settings
(``vector.ssl``, ``vector.tenant``, ``vector.database``, ``vector.headers``, the token), against a
real ``chroma run`` server; the headers are checked on a local receiver that records them."""

from __future__ import annotations

from pathlib import Path

import chromadb
import pytest
from chromadb.config import Settings as ChromaSettings

from taskzilla_sleep.core.errors import StoreError
from taskzilla_sleep.core.settings import VectorSettings
from taskzilla_sleep.stores.backends import open_vectors
from taskzilla_sleep.stores.memory.vectors import HashEmbedder
from tests.http_receiver import receiver

pytestmark = pytest.mark.chroma_server


def server_settings(host: str, port: int, **over: object) -> VectorSettings:
    return VectorSettings.model_validate(
        {"backend": "chroma-server", "host": host, "port": port, "timeout_s": 5} | over
    )


def admin(host: str, port: int) -> chromadb.AdminAPI:
    return chromadb.AdminClient(
        ChromaSettings(
            chroma_api_impl="chromadb.api.fastapi.FastAPI",
            chroma_server_host=host,
            chroma_server_http_port=port,
            anonymized_telemetry=False,
        )
    )


def test_a_tenant_and_database_created_on_the_server_hold_the_collections(
    chroma_address: tuple[str, int], tmp_path: Path
) -> None:
    host, port = chroma_address
    admin(host, port).create_tenant("acme")
    admin(host, port).create_database("memory", tenant="acme")
    settings = server_settings(host, port, tenant="acme", database="memory")
    store = open_vectors(settings, HashEmbedder(), tmp_path)
    try:
        store.upsert("reach", "episodes", ["e1", "e2"], ["deploys on friday", "standup at ten"], [{}, {}])
        assert "acme/memory" in store.describe()
    finally:
        store.close()
    again = open_vectors(settings, HashEmbedder(), tmp_path)  # a new client finds them there
    default = open_vectors(server_settings(host, port), HashEmbedder(), tmp_path)
    try:
        assert again.present("reach", "episodes") == {"e1", "e2"}
        assert default.present("reach", "episodes") == set()  # not in default_tenant/default_database
        names = {
            c.name
            for c in chromadb.HttpClient(host=host, port=port, tenant="acme", database="memory").list_collections()
        }
        assert any("reach" in n for n in names)
    finally:
        again.close()
        default.close()


@pytest.mark.parametrize(
    ("over", "names"),
    [
        ({"tenant": "no-such-tenant"}, ("tenant 'no-such-tenant'", "vector.tenant")),
        ({"database": "no-such-database"}, ("database 'no-such-database'", "vector.database")),
    ],
)
def test_a_tenant_or_database_the_server_does_not_have_is_a_clear_error(
    chroma_address: tuple[str, int], tmp_path: Path, over: dict[str, str], names: tuple[str, str]
) -> None:
    host, port = chroma_address
    store = open_vectors(server_settings(host, port, **over), HashEmbedder(), tmp_path)
    try:
        with pytest.raises(StoreError) as err:
            store.ping()
        message = str(err.value)
        assert all(n in message for n in names), message
        assert f"http://{host}:{port}" in message and "create it on the server" in message
        assert not _exists(host, port, "no-such-tenant")  # nothing was created on the way
    finally:
        store.close()


def _exists(host: str, port: int, name: str) -> bool:
    try:
        admin(host, port).get_tenant(name)
        return True
    except Exception:
        return False


def test_ssl_talks_https_to_the_server(chroma_address: tuple[str, int], tmp_path: Path) -> None:
    host, port = chroma_address  # chroma run serves plain http: an https client fails, naming https
    store = open_vectors(server_settings(host, port, ssl=True), HashEmbedder(), tmp_path)
    try:
        with pytest.raises(StoreError, match=rf"unreachable at https://{host}:{port}"):
            store.ping()
    finally:
        store.close()


def test_headers_and_the_token_go_with_every_request(tmp_path: Path) -> None:
    with receiver() as rx:
        settings = server_settings(
            "127.0.0.1", rx.port, headers={"X-Team-Proxy": "memory"}, token_header="X-Chroma-Token"
        )
        store = open_vectors(settings, HashEmbedder(), tmp_path, token="tok-123")
        try:
            with pytest.raises(StoreError):  # the receiver is no Chroma: its answer does not parse
                store.ping()
        finally:
            store.close()
        sent = rx.received("/api/v2/")
        assert [r.path for r in sent][:2] == ["/api/v2/heartbeat", "/api/v2/auth/identity"]
        for r in sent:
            headers = {k.lower(): v for k, v in r.headers.items()}
            assert headers["x-team-proxy"] == "memory" and headers["x-chroma-token"] == "tok-123", r.path
