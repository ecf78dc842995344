# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""A client of ``fluidvim-api`` over a keystoneauth1 session - what the ``fluidvim`` CLI (with
``--api-url`` / ``FLUIDVIM_API_URL``) and the OSM RO plugin (a VIM account whose url is the API)
use instead of the message bus.

:class:`APIClient` has the methods of :class:`~fluidvim.orchestrator.rpcapi.OrchestratorAPI`, of the
NS client (:meth:`APIClient.ns_api`) and the VIM client (:meth:`APIClient.vim`), and raises the same
exception classes (``InvalidRequest`` for 400 with its field, ``NotFound`` for 404, ``Refused`` for
409; :class:`APIError` - an ``OrchestratorError`` - for anything else, with the HTTP status and the
request id of the API-SIG error body), so callers do not care which path they use. A delete
(204, no body) returns what the RPC method does: ``{"removed" | "terminated" | "deleted": ...}``.
Its requests come from the operation table (:data:`.operations.HTTP`): :meth:`APIClient.call`
sends the operation a client method stands for (path, query and body from its arguments), and
every RPC method of the orchestrator that the API has and this class does not write itself is
added by :func:`_bind` with the RPC method's parameters.

Authentication: Keystone (``username``/``password``/``project_name`` and domains, or a
``token``) when credentials are given. Without ``auth_url`` the client asks the API, whose
keystonemiddleware names its Keystone in the ``WWW-Authenticate`` header of a 401 (what an OSM
VIM account needs: one url, a user, a password and a project). Without credentials: no
authentication (an API with ``auth_strategy = noauth``). Or any keystoneauth session (clouds.yaml,
``OS_CLOUD``, application credentials: the ``openstack fluidvim`` plugin and ``fluidvim
--os-cloud``): :meth:`APIClient.from_session` finds the API in the session's Keystone catalog,
service type :data:`SERVICE_TYPE`, whose endpoint is the API's root URL (``/v1`` is added here).
"""

from __future__ import annotations

import re
import time
import urllib.parse

from .exception import InvalidRequest, NotFound, OrchestratorError, Refused, Unreachable
from .operations import HTTP_BY_CLIENT, client_method, rpc_methods

WWW_AUTH_RE = re.compile(r'Keystone uri="([^"]+)"')

#: fluidvim-api's service type in the Keystone catalog (docs/api.md registers it). Not in the
#: service-types authority; chosen not to collide with one there (tacker is nfv-orchestration).
SERVICE_TYPE = "nfv-placement"


class APIError(OrchestratorError):
    """fluidvim-api answered with an error that is not the request's fault (401, 403, 5xx), or
    could not be reached; ``status`` is the HTTP status (None: no answer)."""

    def __init__(self, message: str, status: int | None = None, request_id: str | None = None):
        super().__init__(message)
        self.status, self.request_id = status, request_id


API_FIX = ("start fluidvim-api (systemctl start fluidvim-api, or fluidvim-api --config-file "
           "FILE), or fix --api-url / FLUIDVIM_API_URL")


class APIUnreachable(APIError, Unreachable):
    """Nothing answered at fluidvim-api's URL."""


def _unreachable(url: str, e: Exception) -> APIError:
    """The one line a client gets when nothing answers at ``url``: what failed, in short (the
    socket's errno text, not urllib3's retry story), and how to bring the API back."""
    m = re.search(r"\[Errno -?\d+\] ([^'\"()]+)", str(e))
    why = m.group(1).strip() if m else f"{type(e).__name__}: {' '.join(str(e).split())[:160]}"
    return APIUnreachable(f"cannot reach fluidvim-api at {url} ({why}): {API_FIX}")


def _q(s) -> str:
    return urllib.parse.quote(str(s), safe="")


class APIClient:
    def __init__(self, url: str, *, auth_url: str | None = None, username: str | None = None,
                 password: str | None = None, project_name: str | None = None,
                 project_id: str | None = None, user_domain_name: str = "Default",
                 project_domain_name: str = "Default", token: str | None = None,
                 timeout: float = 120.0, verify=True, session=None):
        from keystoneauth1 import session as ks_session

        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise APIError(f"url: {url!r} is not the http(s) URL of fluidvim-api")
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.retry = None
        self._noauth_project = None
        self._own_session = session is None
        auth = None
        if session is None:
            if username or token:
                auth = self._auth(auth_url, username, password, project_name, project_id,
                                  user_domain_name, project_domain_name, token, verify)
            else:
                self._noauth_project = project_id or project_name
            session = ks_session.Session(auth=auth, verify=verify, timeout=timeout)
        self.session = session

    def _auth(self, auth_url, username, password, project_name, project_id, user_domain_name,
              project_domain_name, token, verify):
        from keystoneauth1 import identity

        auth_url = auth_url or self.discover_auth_url(verify)
        scope = {"project_id": project_id} if project_id else {
            "project_name": project_name, "project_domain_name": project_domain_name}
        if token:
            return identity.Token(auth_url=auth_url, token=token, **scope)
        return identity.Password(auth_url=auth_url, username=username, password=password,
                                 user_domain_name=user_domain_name, **scope)

    @classmethod
    def from_session(cls, session, *, url: str | None = None, interface: str | None = None,
                     region_name: str | None = None, timeout: float = 120.0) -> "APIClient":
        """A client on an authenticated keystoneauth ``session``; fluidvim-api is ``url`` when
        given, else the ``SERVICE_TYPE`` endpoint of the session's Keystone catalog."""
        from keystoneauth1 import exceptions as ks_exc

        if not url:
            try:
                url = session.get_endpoint(service_type=SERVICE_TYPE,
                                           interface=interface or "public",
                                           region_name=region_name)
            except ks_exc.EndpointNotFound:
                url = None
            except ks_exc.Unauthorized as e:
                raise APIError(f"Keystone refused the credentials: {e}", 401) from None
            except ks_exc.ClientException as e:
                raise APIError(f"cannot find fluidvim-api in the Keystone catalog: {e}") from None
            if not url:
                raise APIError(
                    f"no {SERVICE_TYPE} endpoint ({interface or 'public'}"
                    + (f", region {region_name}" if region_name else "") + ") in the Keystone "
                    f"catalog: register fluidvim-api (`openstack service create --name fluidvim "
                    f"{SERVICE_TYPE}`, then `openstack endpoint create fluidvim public "
                    f"http://HOST:9740`; docs/api.md) or give the URL (--api-url)")
        url = url.rstrip("/")
        if url.endswith("/v1"):              # an endpoint registered with the version
            url = url[:-len("/v1")]
        return cls(url, session=session, timeout=timeout)

    def discover_auth_url(self, verify=True) -> str:
        """The Keystone that fluidvim-api's auth_token names in its 401 answer."""
        from keystoneauth1 import exceptions as ks_exc, session as ks_session

        try:
            r = ks_session.Session(verify=verify, timeout=self.timeout).get(
                self.url + "/v1/zones", authenticated=False, raise_exc=False)
        except ks_exc.ClientException as e:
            raise _unreachable(self.url, e) from None
        m = WWW_AUTH_RE.search(r.headers.get("WWW-Authenticate", ""))
        if r.status_code != 401 or not m:
            raise APIError(f"fluidvim-api at {self.url} did not name its Keystone (status "
                           f"{r.status_code}); give the auth URL (--os-auth-url / config "
                           "auth_url)", r.status_code)
        return m.group(1)

    def close(self) -> None:
        if self._own_session:
            self.session.session.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- transport and errors --
    def request(self, method: str, path: str, body=None, query=None, timeout=None):
        from keystoneauth1 import exceptions as ks_exc

        q = {k: ("true" if v is True else "false" if v is False else v)
             for k, v in (query or {}).items() if v is not None}
        kw = {"raise_exc": False, "timeout": timeout or self.timeout,
              "authenticated": self.session.auth is not None}
        if q:
            kw["params"] = q
        if body is not None:
            kw["json"] = body
        if self._noauth_project:
            kw["headers"] = {"X-Project-Id": self._noauth_project}
        try:
            r = self.session.request(self.url + path, method, **kw)
        except ks_exc.Unauthorized as e:
            raise APIError(f"Keystone refused the credentials: {e}", 401) from None
        except ks_exc.ClientException as e:
            raise _unreachable(self.url, e) from None
        try:
            data = r.json()
        except ValueError:
            data = None
        if r.status_code < 400:
            return data
        # the API-SIG's {"errors": [{"request_id", "code", "status", "title", "detail", ...}]}
        errs = data.get("errors") if isinstance(data, dict) else None
        err = errs[0] if isinstance(errs, list) and errs and isinstance(errs[0], dict) else {}
        msg = err.get("detail") or f"HTTP {r.status_code}: {r.text[:200]}"
        field = err.get("field", "")
        rid = err.get("request_id") or r.headers.get("x-openstack-request-id")
        if r.status_code == 400:
            raise InvalidRequest(msg, field=field)
        if r.status_code == 404:
            raise NotFound(msg, field=field)
        if r.status_code == 409:
            raise Refused(msg)
        if r.status_code == 401:
            msg = f"not authenticated by fluidvim-api ({msg})"
        elif r.status_code == 403:
            msg = f"forbidden: {msg}"
        raise APIError(f"fluidvim-api: {msg}" + (f" [request {rid}]" if rid else ""),
                       r.status_code, rid)

    def call(self, client: str, timeout=None, **args):
        """The operation of the table that the client method ``client`` stands for (e.g.
        ``place``, ``vim.launch``): its path parameters filled in, its query parameters in the
        query and the other arguments in the body (an argument the body does not have is left
        out when None); the answer's body."""
        op = HTTP_BY_CLIENT.get(client)
        if op is None:
            raise APIError(f"{client.replace('.', ' ')}: not in fluidvim-api's REST API")
        missing = [k for k in op.path_params if k not in args]
        if missing:
            raise TypeError(f"{client}(): missing {', '.join(missing)}")
        path = op.path.format_map({k: _q(args.pop(k)) for k in op.path_params})
        kinds = {x["name"]: x["schema"].get("type") for x in op.params}
        props = (op.body or {}).get("properties", {})
        kinds.update({k: v.get("type") for k, v in props.items()})
        args = {k: bool(v) if kinds.get(k) == "boolean" else v for k, v in args.items()}
        query = {k: args.pop(k) for k in op.query if k in args}
        body = None
        if op.body is not None:
            body = {k: v for k, v in args.items() if k in props or v is not None}
        return self.request(op.method.upper(), path, body, query or None, timeout=timeout)

    # -- what OrchestratorAPI has --
    def ping(self, timeout=None):
        """The API answers: its version document (``/``, no token needed; ``/v1/zones`` is
        admin-only). Raises :class:`APIError` when it does not."""
        from keystoneauth1 import exceptions as ks_exc

        try:
            r = self.session.get(self.url + "/", authenticated=False, raise_exc=False,
                                 timeout=timeout or self.timeout)
        except ks_exc.ClientException as e:
            raise _unreachable(self.url, e) from None
        try:
            versions = r.json()["versions"]
        except (ValueError, KeyError, TypeError):
            raise APIError(f"{self.url} is not fluidvim-api: GET / answered {r.status_code} "
                           "without a version document", r.status_code) from None
        return {"url": self.url, "versions": [v["id"] for v in versions]}

    def show_service(self, name):
        return self.call("show_service", name=name)

    def remove_service(self, name):
        self.call("remove_service", name=name)
        return {"removed": name}

    def list_decisions(self, limit=20):
        r = self.call("list_decisions", limit=limit)
        return r["placements"] if isinstance(r, dict) else r      # a page: limit pages

    def terminate(self, instance):
        self.call("terminate", instance=instance)
        return {"terminated": instance}

    def power_plan(self):
        raise APIError("power plan: not in fluidvim-api's REST API yet; run it against the "
                       "orchestrator's message bus (without --api-url)")

    def power_hosts(self):
        raise APIError("power hosts: not in fluidvim-api's REST API yet; run it against the "
                       "orchestrator's message bus (without --api-url)")

    def delete_network(self, zone, network):
        self.call("delete_network", zone=zone, network=network)
        return {"deleted": network}

    # -- network services --
    def ns_api(self):
        return _NS(self)

    # -- the VIM API (OSM RO) --
    def vim(self, method: str, timeout=None, **kw):
        """The VIM API's ``method`` (as :class:`~fluidvim.orchestrator.osm.vim.VimAPI` takes
        it) over HTTP."""
        if "vim." + method not in HTTP_BY_CLIENT:
            raise APIError(f"VIM method {method!r} is not in fluidvim-api")
        return self.call("vim." + method, timeout=timeout, **kw)


def _client_method(row):
    return client_method(row, lambda self, kw: self.call(row.method, **kw),
                         f"{row.method} over fluidvim-api (operations.HTTP).")


def _bind(cls):
    """Gives ``cls`` a method for every RPC method of the orchestrator that the API has
    (an operation whose ``client`` it is) and ``cls`` does not write itself."""
    for row in rpc_methods(""):
        if row.method in HTTP_BY_CLIENT and row.method not in cls.__dict__:
            setattr(cls, row.method, _client_method(row))
    return cls


_bind(APIClient)


class _NS:
    """The NS client's methods (:class:`~fluidvim.orchestrator.mano.rpcapi.NSAPI`) over HTTP."""

    def __init__(self, api: APIClient):
        self.api = api

    @staticmethod
    def _docs(nsd, vnfds):
        # descriptors.Document (or its to_dict()), as NSAPI takes them; duck-typed: the client
        # sits below the NFV front-ends (ARCHITECTURE.md)
        def as_dict(d):
            return d.to_dict() if hasattr(d, "to_dict") else d
        return as_dict(nsd), [as_dict(d) for d in vnfds]

    #: seconds between two polls of an operation occurrence
    POLL_S = 0.5

    def wait(self, op: dict, timeout=600.0, progress=None) -> dict:
        """Poll the operation occurrence ``op`` (a 202's body) until it is no longer PROCESSING;
        ``progress(op, elapsed_s)`` is called on every state change and every 10 s. Raises
        Refused with its error when it failed or rolled back (the 409 the blocking API gave)."""
        t0 = time.monotonic()
        last, said = None, 0.0
        while True:
            el = time.monotonic() - t0
            if progress is not None and (op["operationState"] != last or el - said >= 10):
                progress(op, el)
                last, said = op["operationState"], el
            if op["operationState"] != "PROCESSING":
                break
            if timeout is not None and el > timeout:
                raise APIError(f"ns operation {op['id']} ({op['operation'].lower()}) still "
                               f"processing after {timeout:.0f} s; `openstack fluidvim ns "
                               "operation list` shows it")
            time.sleep(self.POLL_S)
            op = self.operation(op["id"])
        if op["operationState"] != "COMPLETED":
            err = (op.get("error") or {}).get("detail") or op["operationState"].lower()
            raise Refused(f"ns {op.get('nsName') or op['nsInstanceId']}: "
                          f"{op['operation'].lower()} {op['operationState'].lower()}: {err}")
        return op

    def deploy(self, nsd, vnfds, name=None, zone=None, timeout=600.0, progress=None):
        """202 + the instantiate occurrence, polled until it ends; the NS as shown then."""
        nsd, vnfds = self._docs(nsd, vnfds)
        op = self.api.call("ns.deploy", nsd=nsd, vnfds=vnfds, name=name, zone=zone)
        op = self.wait(op, timeout, progress)
        return self.show(op["nsInstanceId"])

    def validate(self, nsd, vnfds, name=None):
        nsd, vnfds = self._docs(nsd, vnfds)
        return self.api.call("ns.validate", nsd=nsd, vnfds=vnfds, name=name)

    def list(self, deleted=False):
        return self.api.call("ns.list", deleted=bool(deleted))

    def show(self, name):
        return self.api.call("ns.show", name=name)

    def operation(self, op_id):
        return self.api.call("ns.operation", op_id=op_id)

    def operations(self, ns=None):
        return self.api.call("ns.operations", ns=ns)

    def delete(self, name, timeout=600.0, progress=None):
        self.wait(self.api.call("ns.delete", name=name), timeout, progress)
        return {"deleted": name}

    def scale(self, name, aspect, direction, timeout=600.0, progress=None):
        op = self.wait(self.api.call("ns.scale", name=name, aspect=aspect, direction=direction),
                       timeout, progress)
        d = op["detail"]
        return {"ns": op["nsName"] or name, "aspect": d.get("aspect", aspect),
                "direction": direction, "level": d.get("to_level"), "operation": op["id"],
                **{k: d[k] for k in ("added", "removed") if k in d},
                "ms": d.get("ms"), "operation_occurrence": op}

    def heal(self, name, instance, timeout=600.0, progress=None):
        op = self.wait(self.api.call("ns.heal", name=name, instance=instance), timeout,
                       progress)
        d = op["detail"]
        return {"ns": op["nsName"] or name, "healed": d.get("instance", instance),
                "replaced_by": d.get("replaced_by"), "operation": op["id"], "ms": d.get("ms"),
                "operation_occurrence": op}
