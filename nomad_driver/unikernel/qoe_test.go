// Copyright 2026 The fluidvim Authors
// SPDX-License-Identifier: Apache-2.0

package unikernel

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/nomad/helper/pluginutils/hclutils"

	"github.com/fluidvim/fluidvim/nomad_driver/control"
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

// contract/vectors/qoe.json: the qoe block the orchestrator's Nomad zone writes for a launch's
// QoE decodes to the qoe request the Python launch core sends for the same QoE
// (tests/unit/test_launch_qoe.py checks the Python side against the same file).
func TestQoEVectors(t *testing.T) {
	b, err := os.ReadFile("../../contract/vectors/qoe.json")
	if err != nil {
		t.Fatal(err)
	}
	var vec struct {
		Cases []struct {
			NomadBlock json.RawMessage `json:"nomad_block"`
			Request    map[string]any  `json:"request"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(b, &vec); err != nil || len(vec.Cases) < 4 {
		t.Fatalf("qoe.json: %v (%d cases)", err, len(vec.Cases))
	}
	for i, c := range vec.Cases {
		var tc TaskConfig
		hclutils.NewConfigParser(taskConfigSpec).ParseJson(t,
			`{"Config": {"qoe": [`+string(c.NomadBlock)+`]}}`, &tc)
		if err := tc.QoE.validate(); err != nil {
			t.Errorf("case %d: %s refused: %v", i, c.NomadBlock, err)
			continue
		}
		capacity, budget, ppm := tc.QoE.Request()
		// through JSON, as the request goes out and as the vector was read
		raw, _ := json.Marshal(control.QoEFields(capacity, budget, ppm, tc.QoE.WaitPPM))
		var got map[string]any
		if err := json.Unmarshal(raw, &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, c.Request) {
			t.Errorf("case %d: %s sends %v, the vector says %v", i, c.NomadBlock, got, c.Request)
		}
	}
}
