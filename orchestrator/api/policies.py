# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Policy defaults of ``fluidvim-api`` (oslo.policy; entry point ``oslo.policy.policies:
fluidvim``; sample: ``oslopolicy-sample-generator --namespace fluidvim`` -> etc/fluidvim-api/
policy.yaml.sample).

Roles are Keystone's default ones (``admin`` implies ``member`` implies ``reader``), on
project-scoped tokens:

* **reader** of a project: reads that project's services, placements, slots, instances,
  networks, network services and VIM objects;
* **member** of a project: also creates, changes and deletes them (register, place, resolve,
  deploy, terminate, ...);
* **admin**: everything, in every project (lists show all projects' resources), and the zones
  with every host's slots, load and queuing delay (infrastructure: admin only, as Nova keeps
  hypervisors).

A resource of another project is reported as not found (404), as Nova does; a reader who tries to
change something of their own project gets 403. The target of every check is
``{"project_id": <the resource's project>}`` (for lists and creation: the caller's project).
"""

from __future__ import annotations

from oslo_policy import policy

ADMIN = "role:admin"
PROJECT_READER = "role:reader and project_id:%(project_id)s"
PROJECT_MEMBER = "role:member and project_id:%(project_id)s"
SCOPE = ["project"]

base_rules = [
    policy.RuleDefault("context_is_admin", ADMIN,
                       description="Admin: every project's resources, every action."),
    policy.RuleDefault("project_reader_or_admin", f"rule:context_is_admin or ({PROJECT_READER})",
                       description="A reader (or member) of the resource's project, or an "
                                   "admin."),
    policy.RuleDefault("project_member_or_admin", f"rule:context_is_admin or ({PROJECT_MEMBER})",
                       description="A member of the resource's project, or an admin."),
]

READ = "rule:project_reader_or_admin"
WRITE = "rule:project_member_or_admin"


def _rule(name, check, description, operations):
    return policy.DocumentedRuleDefault(
        name=f"fluidvim:{name}", check_str=check, description=description,
        operations=[{"method": m, "path": p} for m, p in operations], scope_types=SCOPE)


api_rules = [
    _rule("all_projects", "rule:context_is_admin",
          "See the resources of every project in lists (otherwise only the caller's project's).",
          [("GET", "/v1/services"), ("GET", "/v1/instances"), ("GET", "/v1/ns")]),
    _rule("service:list", READ, "List services.", [("GET", "/v1/services")]),
    _rule("service:get", READ, "Show a service.", [("GET", "/v1/services/{name}")]),
    _rule("service:create", WRITE, "Register or update a service.",
          [("POST", "/v1/services")]),
    _rule("service:delete", WRITE, "Remove a service.", [("DELETE", "/v1/services/{name}")]),
    _rule("placement:create", WRITE, "Place a service (steps 0-3), optionally deploying an "
          "instance where decided.", [("POST", "/v1/placements")]),
    _rule("placement:list", READ, "List placement decisions.", [("GET", "/v1/placements")]),
    _rule("placement:get", READ, "Explain a placement decision.",
          [("GET", "/v1/placements/{decision_id}")]),
    _rule("resolve", WRITE, "Resolve a session to an instance with a free slot (may launch one).",
          [("POST", "/v1/resolve")]),
    _rule("slots:get", READ, "Free session slots of services.", [("GET", "/v1/slots")]),
    _rule("zone:list", "rule:context_is_admin",
          "List zones, every host's slots and load and the queuing delays (infrastructure: "
          "admin only, as Nova keeps hypervisors).", [("GET", "/v1/zones")]),
    _rule("instance:list", READ, "List instances.", [("GET", "/v1/instances")]),
    _rule("instance:delete", WRITE, "Terminate an instance.",
          [("DELETE", "/v1/instances/{instance}")]),
    _rule("network:list", READ, "List networks.", [("GET", "/v1/networks")]),
    _rule("network:create", WRITE, "Create a network in a zone.", [("POST", "/v1/networks")]),
    _rule("network:delete", WRITE, "Delete a network.",
          [("DELETE", "/v1/networks/{zone}/{network}")]),
    _rule("ns:list", READ, "List network services and their lifecycle operation occurrences.",
          [("GET", "/v1/ns"), ("GET", "/v1/ns_lcm_op_occs")]),
    _rule("ns:get", READ, "Show a network service with its operation steps, or one lifecycle "
          "operation occurrence.", [("GET", "/v1/ns/{name}"), ("GET", "/v1/ns_lcm_op_occs/{op_id}")]),
    _rule("ns:create", WRITE, "Deploy (create and instantiate) a network service from an NSD "
          "and its VNFDs; validate descriptors.", [("POST", "/v1/ns"),
                                                  ("POST", "/v1/ns/validate")]),
    _rule("ns:delete", WRITE, "Terminate and delete a network service.",
          [("DELETE", "/v1/ns/{name}")]),
    _rule("ns:update", WRITE, "Scale a network service by an aspect, or heal one of its "
          "instances.", [("POST", "/v1/ns/{name}/scale"), ("POST", "/v1/ns/{name}/heal")]),
    _rule("vim:get", READ, "VIM API (OSM RO): describe a zone, list images and flavors, show "
          "VMs and their status.",
          [("GET", "/v1/vim"), ("GET", "/v1/vim/images"),
           ("GET", "/v1/vim/flavors"), ("GET", "/v1/vim/flavors/{flavor_id}"),
           ("GET", "/v1/vim/vms/{vm_id}"), ("POST", "/v1/vim/vms/status")]),
    _rule("vim:create", WRITE, "VIM API (OSM RO): register images, create flavors, launch VMs "
          "and act on them (pause, unpause, reboot, rebuild).",
          [("POST", "/v1/vim/images"), ("POST", "/v1/vim/flavors"), ("POST", "/v1/vim/vms"),
           ("POST", "/v1/vim/vms/{vm_id}/action")]),
    _rule("vim:delete", WRITE, "VIM API (OSM RO): delete images, flavors and VMs.",
          [("DELETE", "/v1/vim/images/{image_id}"), ("DELETE", "/v1/vim/flavors/{flavor_id}"),
           ("DELETE", "/v1/vim/vms/{vm_id}")]),
]


def list_rules():
    """Entry point ``oslo.policy.policies`` (namespace ``fluidvim``)."""
    return base_rules + api_rules


def make_enforcer(conf) -> policy.Enforcer:
    enforcer = policy.Enforcer(conf)
    enforcer.register_defaults(list_rules())
    return enforcer


def get_enforcer():
    """Entry point ``oslo.policy.enforcer`` (oslopolicy-policy-generator, oslopolicy-checker)."""
    from . import conf as apiconf
    return make_enforcer(apiconf.make_conf())
