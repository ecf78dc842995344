# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
#
# Added to client.hcl to try the plugin on one machine (README, quick start):
#   nomad agent -dev -config etc/nomad/client.hcl -config etc/nomad/dev.hcl
# The Nomad 1.11.3 agent that tools/build-nomad.sh builds stops at start in its AWS fingerprinter
# ("failed to setup IMDS client: unable to add custom RootCAs HTTPClient"); a machine that is not
# a cloud instance needs none of the cloud-metadata fingerprinters. The tests set the same.
client {
  options = {
    "fingerprint.denylist" = "env_aws,env_gce,env_azure,env_digitalocean"
  }
}
