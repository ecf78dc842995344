// Copyright 2026 The fluidvim Authors
// SPDX-License-Identifier: Apache-2.0

// Command fluidvim-unikernel is a Nomad task driver plugin that runs fluidvim VNF unikernels
// in QEMU microvm guests.
package main

import (
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/plugins"

	"github.com/fluidvim/fluidvim/nomad_driver/unikernel"
)

func main() {
	plugins.Serve(func(log hclog.Logger) interface{} { return unikernel.NewPlugin(log) })
}
