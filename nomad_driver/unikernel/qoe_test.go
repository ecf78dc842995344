// Copyright 2026 The fluidvim Authors
// SPDX-License-Identifier: Apache-2.0

package unikernel

import (
	"strings"
	"testing"

	"github.com/hashicorp/nomad/helper/pluginutils/hclutils"
)

// The qoe block's wait_ppm (the VNF's host-wait budget) decodes from HCL and from the JSON job
// the orchestrator's Nomad zone sends (orchestrator/zones/nomad.py job_spec); unset = 0 (off).
func TestQoEWaitPPMDecodes(t *testing.T) {
	var tc TaskConfig
	hclutils.NewConfigParser(taskConfigSpec).ParseHCL(t, `config {
  qoe {
    capacity    = 12
    deadline_ms = 4
    quantile    = 0.99
    wait_ppm    = 250000
  }
}`, &tc)
	if tc.QoE.WaitPPM != 250_000 || tc.QoE.validate() != nil {
		t.Fatalf("HCL qoe block decodes to %+v (validate: %v)", tc.QoE, tc.QoE.validate())
	}
	var js, none TaskConfig
	hclutils.NewConfigParser(taskConfigSpec).ParseJson(t, `{"Config": {"qoe": [{"capacity": 12, `+
		`"deadline_ms": "4.0", "quantile": "0.99", "wait_ppm": 1000000}]}}`, &js)
	if js.QoE.WaitPPM != 1_000_000 || js.QoE.validate() != nil {
		t.Fatalf("JSON qoe block decodes to %+v (validate: %v)", js.QoE, js.QoE.validate())
	}
	hclutils.NewConfigParser(taskConfigSpec).ParseJson(t, `{"Config": {"qoe": [{"capacity": 12, `+
		`"deadline_ms": "4.0", "quantile": "0.99"}]}}`, &none)
	if none.QoE.WaitPPM != 0 || none.QoE.validate() != nil {
		t.Fatalf("qoe block without wait_ppm decodes to %+v", none.QoE)
	}
}

// A wait_ppm outside 0..1000000 (a share of a window, in ppm) is refused naming qoe.wait_ppm.
func TestQoEWaitPPMOutOfRangeNamesTheField(t *testing.T) {
	for _, w := range []int64{-1, 1_000_001} {
		q := TaskQoE{Capacity: 8, DeadlineMS: "5", Quantile: "0.99", WaitPPM: w}
		err := q.validate()
		fe, ok := err.(*FieldError)
		if !ok || fe.Field != "qoe.wait_ppm" || !strings.Contains(err.Error(), "0..1000000") {
			t.Errorf("wait_ppm %d: error %v does not name qoe.wait_ppm and its range", w, err)
		}
	}
}
