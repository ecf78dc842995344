# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""OSM RO VIM connector for fluidvim (VIM type ``fluidvim``; entry point ``rovim_fluidvim``).

RO builds ``vimconnector(uuid=..., name=..., tenant_id=..., tenant_name=..., url=..., url_admin=...,
user=..., passwd=..., config=..., persistent_info=...)`` from a VIM account created with::

    osm vim-create --name fv --account_type fluidvim --auth_url rabbit://HOST:5672/ \\
        --user guest --password guest --tenant fluidvim --config '{zone: local}'

* ``url``: fluidvim-api's URL (``http://api.example:9740``): ``user``/``passwd`` and the
  tenant (project) authenticate with Keystone through a keystoneauth1 session (``config``:
  ``auth_url``, default the Keystone the API names; ``user_domain_name``,
  ``project_domain_name``, ``insecure``); or the orchestrator's oslo.messaging transport URL
  (``rabbit://[user:pass@]host:port/``, the embedded demo), where ``user``/``passwd`` fill in
  the broker credentials when the URL has none;
* ``config``: ``topic`` (the orchestrator's RPC topic, default ``fluidvim-orchestrator``), ``zone``
  (the fluidvim zone this account maps to; default the orchestrator's local zone) and
  ``rpc_timeout`` (seconds, default 60).

Mapping: an RO network is a zone network (local zone: a Linux bridge); an image is a VNF kernel the
zone can boot; a flavor is memory/vCPUs (+ ``extended: {session-slots: N}``); a VM is one VNF whose
Click configuration is the VDU's day-0 ``cloud_config["user-data"]``. See README.md next to this
file for what is not supported (each raises VimConnNotSupportedException saying what is).
"""

from __future__ import annotations

import logging
import re
import urllib.parse

import yaml

from fluidvim.common import instance_states as istates
from fluidvim.common.zonetypes import mac_problem
from fluidvim.vnf import limits

from . import vimconn_base as vc

SUPPORTED_NET_TYPES = ("bridge",)
SUPPORTED_IFACE_TYPES = ("virtual", "VIRTIO", "paravirt")
FLAVOR_EXTENDED_KEYS = ("session-slots",)
# an instance status -> OSM's VM status (one not here: OTHER)
STATUS = {istates.RUNNING: "ACTIVE", istates.BUILDING: "BUILD", istates.PAUSED: "PAUSED",
          istates.ERROR: "ERROR",
          istates.DELETED: "DELETED"}
DEFAULT_TOPIC = "fluidvim-orchestrator"
# what action_vminstance takes (RO's action_dict keys)
ACTIONS = ("start", "resume", "pause", "stop", "shutoff", "shutdown", "forceOff", "reboot",
           "rebuild", "terminate")
# a Click comment line in the day-0 config: "// fluidvim: session-slots = 64"
SLOTS_DIRECTIVE = re.compile(r"//\s*fluidvim:\s*session-slots\s*=\s*(.*?)\s*$")


def _yaml(d) -> str:
    return yaml.safe_dump(d, default_flow_style=True, width=256).strip()


class vimconnector(vc.VimConnector):  # noqa: N801 - the class name RO plugins must use
    """fluidvim as an OSM VIM. No traffic in the constructor (RO's rule); the first call opens
    one oslo.messaging transport, kept for the connector's life."""

    def __init__(self, uuid, name, tenant_id, tenant_name, url, url_admin=None, user=None,
                 passwd=None, log_level=None, config=None, persistent_info=None):
        config = dict(config or {})
        super().__init__(uuid=uuid, name=name, tenant_id=tenant_id, tenant_name=tenant_name,
                         url=url, url_admin=url_admin, user=user, passwd=passwd,
                         log_level=log_level, config=config,
                         persistent_info=persistent_info if persistent_info is not None else {})
        self.logger = logging.getLogger("ro.vim.fluidvim")
        if log_level:
            self.logger.setLevel(getattr(logging, log_level))
        self.api_url = url if isinstance(url, str) and url.startswith(("http://", "https://")) \
            else None
        self.transport_url = None if self.api_url else self._transport_url(url, user, passwd)
        self.user, self.passwd = user, passwd
        self.tenant_name, self.tenant_id = tenant_name, tenant_id
        self.topic = self._config_str(config, "topic", DEFAULT_TOPIC)
        self.zone = self._config_str(config, "zone", None)
        try:
            self.rpc_timeout = float(config.get("rpc_timeout", 60.0))
            if not 1.0 <= self.rpc_timeout <= 3600.0:
                raise ValueError
        except (TypeError, ValueError):
            raise vc.VimConnException(f"config.rpc_timeout: {config.get('rpc_timeout')!r} is not "
                                      "a number of seconds in 1..3600") from None
        self._apis = None

    # -- arguments --
    @staticmethod
    def _transport_url(url, user, passwd) -> str:
        if not isinstance(url, str) or "://" not in url:
            raise vc.VimConnException(f"url: {url!r} is not an oslo.messaging transport URL; "
                                      "give the orchestrator's, e.g. rabbit://HOST:5672/ "
                                      "(osm vim-create --auth_url)")
        p = urllib.parse.urlsplit(url)
        if p.scheme not in ("rabbit", "amqp", "kombu", "fake") or (p.scheme != "fake"
                                                                   and not p.hostname):
            raise vc.VimConnException(f"url: {url!r}: expected rabbit://[USER:PASSWORD@]HOST"
                                      "[:PORT]/[VHOST] (the orchestrator's transport_url)")
        if user and "@" not in p.netloc:
            cred = urllib.parse.quote(str(user), safe="")
            if passwd:
                cred += ":" + urllib.parse.quote(str(passwd), safe="")
            p = p._replace(netloc=f"{cred}@{p.netloc}")
        return urllib.parse.urlunsplit(p)

    @staticmethod
    def _config_str(config, key, default):
        v = config.get(key, default)
        if v is not None and (not isinstance(v, str) or not v.strip()):
            raise vc.VimConnException(f"config.{key}: {v!r} is not a non-empty string")
        return v

    # -- transport and error mapping --
    def _api(self):
        if self._apis is None and self.api_url:
            self._apis = (self._http_api(),) * 2
        if self._apis is None:
            from oslo_config import cfg

            from fluidvim.orchestrator import conf as orchconf
            from fluidvim.orchestrator.osm.vim import VimAPI
            from fluidvim.orchestrator.rpcapi import OrchestratorAPI

            conf = cfg.ConfigOpts()
            orchconf.register_opts(conf)
            orchconf.register_messaging_opts(conf)
            conf([], project="fluidvim", default_config_files=[])
            orchconf.disable_rabbit_heartbeat(conf)
            conf.set_override("transport_url", self.transport_url, group="orchestrator")
            conf.set_override("topic", self.topic, group="orchestrator")
            conf.set_override("rpc_timeout", self.rpc_timeout, group="orchestrator")
            vim = self._guard(lambda: VimAPI(conf))
            orch = OrchestratorAPI(conf, transport=vim.transport)
            self._apis = (orch, vim)
        return self._apis

    def _http_api(self):
        """fluidvim-api through a keystoneauth1 session: the VIM account's user, password and
        project (tenant); Keystone is config ``auth_url`` or the one the API names."""
        from fluidvim.orchestrator.apiclient import APIClient

        cfg = self.config
        return self._guard(lambda: APIClient(
            self.api_url, auth_url=cfg.get("auth_url"), username=self.user,
            password=self.passwd, project_name=self.tenant_name,
            project_id=None if self.tenant_name else self.tenant_id,
            user_domain_name=cfg.get("user_domain_name", "Default"),
            project_domain_name=cfg.get("project_domain_name", "Default"),
            timeout=self.rpc_timeout, verify=not cfg.get("insecure", False)))

    def close(self) -> None:
        """Release the transport (RO drops connectors without calling this; it is for tests)."""
        if self._apis is not None:
            self._apis[1].close()
            self._apis = None

    def _guard(self, fn):
        """Run an RPC; the orchestrator's errors become RO's exception classes."""
        from fluidvim.orchestrator import exception as oe

        try:
            return fn()
        except oe.NotFound as e:
            raise vc.VimConnNotFoundException(e.message) from None
        except oe.InvalidRequest as e:
            raise vc.VimConnException(e.message) from None
        except oe.Refused as e:
            raise vc.VimConnException(e.message, http_code=409) from None
        except oe.OrchestratorError as e:            # broker/API unreachable, no reply
            if getattr(e, "status", None) in (401, 403):          # fluidvim-api's Keystone
                raise vc.VimConnAuthException(f"fluidvim VIM {self.name}: {e.message}") \
                    from None
            raise vc.VimConnConnectionException(f"fluidvim VIM {self.name}: {e.message}") \
                from None
        except Exception as e:
            import oslo_messaging as messaging
            if isinstance(e, messaging.MessagingException):
                raise vc.VimConnConnectionException(f"fluidvim VIM {self.name}: {e}") from None
            raise

    def _vim(self, method, **kwargs):
        api = self._api()[1]
        if method not in ("list_flavors", "get_flavor", "create_flavor", "delete_flavor",
                          "vm_status", "get_vm", "delete_vm", "vm_action"):
            kwargs.setdefault("zone", self.zone)
        return self._guard(lambda: api.vim(method, **kwargs))

    def _orch(self, method, **kwargs):
        api = self._api()[0]
        return self._guard(lambda: getattr(api, method)(**kwargs))

    def _zone(self) -> str:
        """The zone this account maps to (asks the orchestrator for its local zone once)."""
        if self.zone is None:
            self.zone = self._vim("describe")["zone"]
        return self.zone

    # -- connectivity --
    def check_vim_connectivity(self):
        d = self._vim("describe")
        self.zone = d["zone"]
        self.logger.info("fluidvim VIM %s: zone %s (%s), orchestrator zones %s", self.name,
                         d["zone"], d["kind"], ", ".join(d["zones"]))

    # -- networks --
    def new_network(self, net_name, net_type, ip_profile=None, shared=False,
                    provider_network_profile=None):
        if net_type not in SUPPORTED_NET_TYPES:
            raise vc.VimConnNotSupportedException(
                f"net_type {net_type!r}: fluidvim networks are Linux bridges in the zone "
                "(net_type 'bridge'); underlay 'data'/'ptp' networks for SR-IOV or passthrough "
                "are not supported")
        if provider_network_profile and any(provider_network_profile.values()):
            raise vc.VimConnNotSupportedException(
                f"provider_network_profile {provider_network_profile!r}: fluidvim networks have "
                "no provider network or segmentation id (VLAN/VXLAN); leave it empty")
        if ip_profile:
            self.logger.info("network %s: fluidvim networks are plain L2 bridges; ip_profile "
                             "(%s) is not applied (no DHCP, no gateway)", net_name, ip_profile)
        net = self._orch("create_network", zone=self._zone(), name=self._net_name(net_name))
        return net["id"], {}

    @staticmethod
    def _net_name(net_name) -> str:
        """RO's network name, or a valid stand-in that stays unique to it."""
        import hashlib
        import re

        from fluidvim.common.zonetypes import NETWORK_NAME_RE

        s = str(net_name or "")
        if NETWORK_NAME_RE.fullmatch(s):
            return s
        clean = re.sub(r"[^A-Za-z0-9_.-]+", "-", s).strip("-_.")[:54] or "net"
        return f"{clean}-{hashlib.sha256(s.encode()).hexdigest()[:8]}"

    @staticmethod
    def _net_dict(n) -> dict:
        return {"id": n["id"], "name": n["name"], "status": "ACTIVE", "type": "bridge",
                "network_type": "flat", "zone": n["zone"], "ports": n["ports"]}

    @staticmethod
    def _filtered(items, filter_dict, keys):
        """RO's filter_dict: keep the items equal on every given key of ``keys`` (others, such as
        shared or tenant_id, mean nothing here)."""
        f = {k: v for k, v in (filter_dict or {}).items() if k in keys and v is not None}
        return [it for it in items if all(it.get(k) == v for k, v in f.items())]

    def get_network_list(self, filter_dict=None):
        nets = [self._net_dict(n) for n in self._orch("list_networks", zone=self._zone())]
        return self._filtered(nets, filter_dict, ("id", "name"))

    def get_network(self, net_id):
        nets = self.get_network_list({"id": net_id})
        if not nets:
            raise vc.VimConnNotFoundException(f"network {net_id!r} not found in zone "
                                              f"{self._zone()}")
        return nets[0]

    def delete_network(self, net_id, created_items=None):
        net = self.get_network(net_id)
        if net["ports"]:
            raise vc.VimConnConflictException(
                f"network {net['name']!r} ({net_id}) still has interfaces attached "
                f"({', '.join(net['ports'])}): delete their VMs first")
        self._orch("delete_network", zone=self._zone(), network=net_id)
        return net_id

    def refresh_nets_status(self, net_list):
        try:
            nets = {n["id"]: n for n in self.get_network_list()}
        except vc.VimConnException as e:
            return {nid: {"status": "VIM_ERROR", "error_msg": str(e)} for nid in net_list}
        out = {}
        for nid in net_list:
            n = nets.get(nid)
            out[nid] = ({"status": "ACTIVE", "vim_info": _yaml(n)} if n else
                        {"status": "DELETED", "error_msg": f"network {nid} not found"})
        return out

    # -- flavors --
    def new_flavor(self, flavor_data):
        ram, vcpus, slots = self._flavor_fields(flavor_data)
        fl = self._vim("create_flavor", name=str(flavor_data.get("name") or f"fv-{ram}m-{vcpus}c"),
                       ram=ram, vcpus=vcpus, disk=flavor_data.get("disk") or 0, slots=slots)
        return fl["id"]

    @staticmethod
    def _flavor_fields(flavor_data):
        if not isinstance(flavor_data, dict):
            raise vc.VimConnException("flavor_data must be a dictionary with ram and vcpus")
        for key in ("ram", "vcpus"):
            if flavor_data.get(key) is None:
                raise vc.VimConnException(f"flavor_data.{key}: missing (a fluidvim flavor is "
                                          "ram in MiB and vcpus)")
        ext = dict(flavor_data.get("extended") or {})
        other = sorted(k for k, v in ext.items() if k not in FLAVOR_EXTENDED_KEYS and v)
        if other:
            raise vc.VimConnNotSupportedException(
                f"flavor extended {', '.join(other)}: fluidvim VNFs have no NUMA, CPU pinning, "
                "huge pages, quotas or passthrough interfaces; the only extended field is "
                "session-slots (the VNF's session slots)")
        slots = ext.get("session-slots")
        return flavor_data["ram"], flavor_data["vcpus"], slots

    def get_flavor(self, flavor_id=None, flavor_name=None):
        """A flavor by id or, as RO asks since late 2024, by name (the oldest of that name)."""
        if flavor_id:
            return self._vim("get_flavor", flavor_id=flavor_id)
        if not flavor_name:
            raise vc.VimConnException("get_flavor: give flavor_id or flavor_name (neither was "
                                      "given)")
        for fl in self._vim("list_flavors"):
            if fl["name"] == flavor_name:
                return fl
        raise vc.VimConnNotFoundException(f"flavor_name: no flavor named {flavor_name!r} "
                                          "(create it with new_flavor)")

    def get_flavor_id_from_data(self, flavor_dict):
        ram, vcpus, slots = self._flavor_fields(flavor_dict)
        for fl in self._vim("list_flavors"):
            if fl["ram"] == ram and fl["vcpus"] == vcpus and fl["slots"] == slots:
                return fl["id"]
        raise vc.VimConnNotFoundException(f"no flavor with ram {ram}, vcpus {vcpus}"
                                          + (f", session-slots {slots}" if slots else ""))

    def delete_flavor(self, flavor_id):
        self._vim("delete_flavor", flavor_id=flavor_id)
        return flavor_id

    # -- images --
    def new_image(self, image_dict):
        loc = image_dict.get("location") if isinstance(image_dict, dict) else None
        if not loc:
            raise vc.VimConnException("image_dict.location: missing; give the path of the VNF "
                                      "kernel on the orchestrator's host")
        name = image_dict.get("name") or loc.rsplit("/", 1)[-1].removesuffix(".elf")
        return self._vim("register_image", name=name, location=loc)["id"]

    def get_image_list(self, filter_dict=None):
        return self._filtered(self._vim("list_images"), filter_dict,
                              ("id", "name", "checksum", "location"))

    def get_image_id_from_path(self, path):
        images = self.get_image_list({"location": path})
        if not images:
            raise vc.VimConnNotFoundException(f"no image with location {path!r} in zone "
                                              f"{self._zone()}")
        return images[0]["id"]

    def delete_image(self, image_id):
        self._vim("delete_image", image_id=image_id)
        return image_id

    # -- VMs --
    def new_vminstance(self, name, description, start, image_id, flavor_id,
                       affinity_group_list, net_list, cloud_config=None, disk_list=None,
                       availability_zone_index=None, availability_zone_list=None,
                       security_group_name=None, **newer):
        """RO's VDU creation. ``security_group_name`` (newer RO releases) and arguments of RO
        releases after this plugin are accepted when empty and refused otherwise."""
        asked = {k: v for k, v in {"security_group_name": security_group_name, **newer}.items()
                 if v}
        if asked:
            raise vc.VimConnNotSupportedException(
                f"{', '.join(sorted(asked))}: fluidvim networks are plain bridges without "
                "security groups or other per-VM extras")
        if start is False:
            raise vc.VimConnNotSupportedException("start=False: fluidvim VNFs run as soon as "
                                                  "they are created (no paused creation)")
        if affinity_group_list:
            raise vc.VimConnNotSupportedException("affinity_group_list: fluidvim has no "
                                                  "affinity groups (one zone per VIM account)")
        if disk_list:
            raise vc.VimConnNotSupportedException("disk_list: fluidvim VNFs are unikernels "
                                                  "without disks or volumes")
        if availability_zone_index is not None:
            az = (availability_zone_list or [None])[availability_zone_index] \
                if availability_zone_index < len(availability_zone_list or []) else None
            if az != self._zone():
                raise vc.VimConnNotSupportedException(
                    f"availability zone {az!r}: this VIM account maps to fluidvim zone "
                    f"{self._zone()!r} only; create one VIM account per zone (config zone)")
        nics = []
        for i, net in enumerate(net_list or []):
            nics.append(self._nic(i, net))
        macs = [(net.get("mac_address") or "").lower() or None for net in net_list or []]
        click = self._click_config(cloud_config)
        vm = self._vim("launch", name=name, description=description or "", image_id=image_id,
                       flavor_id=flavor_id, nics=nics, click_config=click,
                       slots=self._slots_directive(click), macs=macs if any(macs) else None)
        for net, iface in zip(net_list or [], vm["interfaces"]):
            net["vim_id"] = iface["vim_interface_id"]       # RO matches interfaces by this
        return vm["id"], {}

    @staticmethod
    def _nic(i, net) -> str:
        if not isinstance(net, dict):
            raise vc.VimConnException(f"net_list[{i}] must be a dictionary")
        t = net.get("type", "virtual")
        if t not in SUPPORTED_IFACE_TYPES:
            raise vc.VimConnNotSupportedException(
                f"net_list[{i}].type {t!r}: fluidvim VNFs have virtio NICs on zone networks "
                "(type 'virtual'); SR-IOV, PCI passthrough (VF/PF/VFnotShared) are not supported")
        if net.get("floating_ip"):
            raise vc.VimConnNotSupportedException(f"net_list[{i}].floating_ip: fluidvim has no "
                                                  "floating IPs")
        mac = net.get("mac_address")
        if mac and (not isinstance(mac, str) or mac_problem(mac.lower())):
            raise vc.VimConnException(f"net_list[{i}].mac_address: {mac!r} is not a unicast "
                                      "MAC like 52:54:00:12:34:56")
        if not net.get("net_id"):
            raise vc.VimConnException(f"net_list[{i}].net_id: missing (the VIM network id from "
                                      "new_network)")
        return net["net_id"]

    @staticmethod
    def _click_config(cloud_config) -> str:
        hint = ("fluidvim VNFs take their Click configuration as day-0 user-data: put it in the "
                "VDU's cloud-init / cloud-init-file")
        ud = cloud_config.get("user-data") if isinstance(cloud_config, dict) else cloud_config
        if isinstance(ud, list):
            ud = [u for u in ud if u and u.strip()]
            if len(ud) != 1:
                raise vc.VimConnException(f"cloud_config user-data: {len(ud)} parts; {hint} "
                                          "as one text")
            ud = ud[0]
        if not isinstance(ud, str) or not ud.strip():
            raise vc.VimConnException(f"cloud_config user-data: missing; {hint}")
        if isinstance(cloud_config, dict) and cloud_config.get("config-files"):
            raise vc.VimConnNotSupportedException("cloud_config config-files: a unikernel VNF "
                                                  "has no file system to write them to")
        first = ud.lstrip().split("\n", 1)[0]
        if first.startswith(("#cloud-config", "#!", "#include", "#cloud-boothook")) \
                or ud.startswith("Content-Type: multipart"):
            raise vc.VimConnException(f"cloud_config user-data starts with {first[:40]!r}, which "
                                      f"is cloud-init for a Linux guest; {hint}")
        return ud

    @staticmethod
    def _slots_directive(click: str) -> int | None:
        """Session slots from a ``// fluidvim: session-slots = N`` line of the day-0 config (a
        VNFD cannot put fields of its own into RO's flavor; its cloud-init can carry this)."""
        for n, line in enumerate(click.splitlines(), 1):
            m = SLOTS_DIRECTIVE.search(line)
            if m:
                v = m.group(1)
                if not v.isdigit() or not limits.SLOTS_MIN <= int(v) <= limits.SLOTS_MAX:
                    raise vc.VimConnException(f"cloud_config user-data line {n}: session-slots "
                                              f"{v!r} is not an integer in "
                                              f"{limits.SLOTS_MIN}..{limits.SLOTS_MAX}")
                return int(v)
        return None

    def get_vminstance(self, vm_id):
        vm = self._vim("get_vm", vm_id=vm_id)
        vm["status"] = STATUS.get(vm["status"], "OTHER")
        return vm

    def delete_vminstance(self, vm_id, created_items=None, volumes_to_hold=None):
        self._vim("delete_vm", vm_id=vm_id)
        return vm_id

    def refresh_vms_status(self, vm_list):
        try:
            st = self._vim("vm_status", vm_ids=list(vm_list))
        except vc.VimConnException as e:
            return {vid: {"status": "VIM_ERROR", "error_msg": str(e)} for vid in vm_list}
        out = {}
        for vid in vm_list:
            s = st.get(vid) or {"status": istates.DELETED}
            d = {"status": STATUS.get(s["status"], "OTHER"),
                 "vim_info": _yaml({k: v for k, v in s.items() if k != "interfaces"})}
            if s.get("error"):
                d["error_msg"] = s["error"]
            d["interfaces"] = [{"vim_interface_id": i["vim_interface_id"],
                                "mac_address": i["mac_address"], "vim_net_id": i["vim_net_id"],
                                "ip_address": None, "compute_node": s.get("host"),
                                "vim_info": _yaml(i)} for i in s.get("interfaces", [])]
            out[vid] = d
        return out

    def action_vminstance(self, vm_id, action_dict, created_items=None):
        """RO's VM actions (``vnf-operate``, ``ns-action``) -> the orchestrator's instance
        actions; the VM keeps its id, NICs and day-0 configuration through all of them.

        start/resume: a paused VM runs again, a running one is left alone, a crashed one
        (ERROR) boots again; pause, and stop/shutoff/shutdown/forceOff (QEMU's own ``stop``:
        the vCPUs halt, memory and NICs are kept, so start is instant): PAUSED; reboot (SOFT):
        the Click configuration restarts; reboot HARD and rebuild: a new boot from the image;
        terminate: deleted. Returns None (no console)."""
        if not isinstance(action_dict, dict) or len(action_dict) != 1:
            raise vc.VimConnException(f"action_dict: {action_dict!r}: give one action, e.g. "
                                      "{'pause': None}")
        (action, arg), = action_dict.items()
        if action == "terminate":
            self.delete_vminstance(vm_id, created_items)
            return None
        op = self._action_op(vm_id, action, arg)
        if op is not None:
            self._vim("vm_action", vm_id=vm_id, action=op)
        return None

    def _action_op(self, vm_id, action, arg):
        """The orchestrator action for RO's ``action`` (None = nothing to do)."""
        if action in ("pause", "stop", "shutoff", "shutdown", "forceOff"):
            return "pause"
        if action == "rebuild" or (action == "start" and arg == "rebuild"):
            return "rebuild"
        if action == "reboot":
            kind = (arg or {}).get("type", "SOFT") if isinstance(arg, dict) else "SOFT"
            return "rebuild" if str(kind).upper() == "HARD" else "reboot"
        if action in ("start", "resume"):
            status = self.get_vminstance(vm_id)["status"]
            return {"PAUSED": "unpause", "ERROR": "rebuild"}.get(status)
        raise vc.VimConnNotSupportedException(
            f"action {action!r}: supported: {', '.join(ACTIONS)} (createImage, migrate, "
            "console and the rest are not: a VNF's image is its kernel, its console a serial "
            "log in the orchestrator host's run dir)")

    def get_vminstance_console(self, vm_id, console_type="vnc"):
        raise vc.VimConnNotSupportedException(
            f"console {console_type!r}: fluidvim VNFs have no VNC/SPICE console; their serial "
            "log is in the orchestrator host's run dir ([vnf] run_dir)")
