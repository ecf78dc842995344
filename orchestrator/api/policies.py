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
A rule's documented operations are those of the operation table
(:data:`fluidvim.orchestrator.operations.HTTP`) that name it.
"""

from __future__ import annotations

from oslo_policy import policy

from ..operations import HTTP

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


def _rule(name, check, description, operations=None):
    """The rule ``fluidvim:<name>``; its operations: those of the table with this policy."""
    if operations is None:
        operations = [(o.method.upper(), o.path) for o in HTTP if o.policy == name]
    return policy.DocumentedRuleDefault(
        name=f"fluidvim:{name}", check_str=check, description=description,
        operations=[{"method": m, "path": p} for m, p in operations], scope_types=SCOPE)


api_rules = [
    _rule("all_projects", "rule:context_is_admin",
          "See the resources of every project in lists (otherwise only the caller's project's).",
          [("GET", "/v1/services"), ("GET", "/v1/instances"), ("GET", "/v1/ns")]),
    _rule("service:list", READ, "List services."),
    _rule("service:get", READ, "Show a service."),
    _rule("service:create", WRITE, "Register or update a service."),
    _rule("service:delete", WRITE, "Remove a service."),
    _rule("placement:create", WRITE, "Place a service (steps 0-3), optionally deploying an "
          "instance where decided."),
    _rule("placement:list", READ, "List placement decisions."),
    _rule("placement:get", READ, "Explain a placement decision."),
    _rule("resolve", WRITE, "Resolve a session to an instance with a free slot (may launch one)."),
    _rule("slots:get", READ, "Free session slots of services."),
    _rule("zone:list", "rule:context_is_admin",
          "List zones, every host's slots and load and the queuing delays (infrastructure: "
          "admin only, as Nova keeps hypervisors)."),
    _rule("instance:list", READ, "List instances."),
    _rule("instance:delete", WRITE, "Terminate an instance."),
    _rule("network:list", READ, "List networks."),
    _rule("network:create", WRITE, "Create a network in a zone."),
    _rule("network:delete", WRITE, "Delete a network."),
    _rule("ns:list", READ, "List network services and their lifecycle operation occurrences."),
    _rule("ns:get", READ, "Show a network service with its operation steps, or one lifecycle "
          "operation occurrence."),
    _rule("ns:create", WRITE, "Deploy (create and instantiate) a network service from an NSD "
          "and its VNFDs; validate descriptors."),
    _rule("ns:delete", WRITE, "Terminate and delete a network service."),
    _rule("ns:update", WRITE, "Scale a network service by an aspect, or heal one of its "
          "instances."),
    _rule("vim:get", READ, "VIM API (OSM RO): describe a zone, list images and flavors, show "
          "VMs and their status."),
    _rule("vim:create", WRITE, "VIM API (OSM RO): register images, create flavors, launch VMs "
          "and act on them (pause, unpause, reboot, rebuild)."),
    _rule("vim:delete", WRITE, "VIM API (OSM RO): delete images, flavors and VMs."),
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
