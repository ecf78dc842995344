// Copyright 2026 The fluidvim Authors
// SPDX-License-Identifier: Apache-2.0

package unikernel

import (
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/nomad/helper/pluginutils/hclutils"
)

// nic blocks decode from HCL and from the JSON job; the older nics/macs lists become the same
// nic blocks, which are what the launch reads.
func TestNICBlocksAndTheOlderLists(t *testing.T) {
	var hcl TaskConfig
	hclutils.NewConfigParser(taskConfigSpec).ParseHCL(t, `config {
  nic {
    bridge = "br0"
    mac    = "fa:16:3e:00:00:01"
  }
  nic {}
  nic { bridge = "br1" }
}`, &hcl)
	want := []TaskNIC{{Bridge: "br0", MAC: "fa:16:3e:00:00:01"}, {}, {Bridge: "br1"}}
	if !reflect.DeepEqual(hcl.NIC, want) {
		t.Fatalf("nic blocks decode to %+v, want %+v", hcl.NIC, want)
	}
	var js TaskConfig
	hclutils.NewConfigParser(taskConfigSpec).ParseJson(t, `{"Config": {"nic": [`+
		`{"bridge": "br0", "mac": "fa:16:3e:00:00:01"}, {}, {"bridge": "br1"}]}}`, &js)
	if !reflect.DeepEqual(js.NIC, want) {
		t.Fatalf("JSON nic blocks decode to %+v, want %+v", js.NIC, want)
	}
	var old TaskConfig
	hclutils.NewConfigParser(taskConfigSpec).ParseHCL(t, `config {
  nics = ["br0", "", "br1"]
  macs = ["fa:16:3e:00:00:01", "", ""]
}`, &old)
	for name, tc := range map[string]*TaskConfig{"hcl": &hcl, "json": &js, "old": &old} {
		if err := tc.checkNICs(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(tc.NIC, want) || tc.NICs != nil || tc.MACs != nil ||
			!reflect.DeepEqual(tc.fixedMACs(), []string{"fa:16:3e:00:00:01", "", ""}) {
			t.Errorf("%s: NIC %+v NICs %q MACs %q", name, tc.NIC, tc.NICs, tc.MACs)
		}
		if err := tc.checkNICs(); err != nil { // a validated config validates again
			t.Errorf("%s: second check: %v", name, err)
		}
	}
	// no MAC fixed: no MACs, as the older form without macs (a warm shell of any MACs fits)
	plain := TaskConfig{NIC: []TaskNIC{{Bridge: "br0"}, {}}}
	if err := plain.checkNICs(); err != nil || plain.fixedMACs() != nil || len(plain.NIC) != 2 {
		t.Errorf("plain nic blocks: %v NIC %+v MACs %q", err, plain.NIC, plain.fixedMACs())
	}
}

func TestNICErrorsNameTheField(t *testing.T) {
	cases := map[string]TaskConfig{
		"nic":           {NIC: []TaskNIC{{Bridge: "br0"}}, NICs: []string{"br0"}},
		"nic[1].mac":    {NIC: []TaskNIC{{}, {MAC: "01:00:5e:00:00:01"}}},
		"nic[0].bridge": {NIC: []TaskNIC{{Bridge: "bad bridge name!"}}},
		"macs":          {NICs: []string{"", ""}, MACs: []string{"fa:16:3e:00:00:01"}},
		"macs[1]":       {NICs: []string{"", ""}, MACs: []string{"", "00:00:00:00:00:00"}},
		"nics[1]":       {NICs: []string{"br0", "bad bridge name!"}},
		"nics":          {NICs: make([]string, 5)},
	}
	for field, tc := range cases {
		err := tc.checkNICs()
		fe, ok := err.(*FieldError)
		if !ok || fe.Field != field {
			t.Errorf("%s: got %v", field, err)
		}
	}
	for _, both := range []TaskConfig{{NIC: []TaskNIC{{}}, NICs: []string{""}},
		{NIC: []TaskNIC{{}}, MACs: []string{""}}} {
		err := both.checkNICs()
		if fe, ok := err.(*FieldError); !ok || fe.Field != "nic" ||
			!strings.Contains(err.Error(), "drop nics and macs") {
			t.Errorf("nic blocks with %+v: %v", both, err)
		}
	}
	many := TaskConfig{NIC: make([]TaskNIC, 5)}
	if fe, ok := many.checkNICs().(*FieldError); !ok || fe.Field != "nic" {
		t.Errorf("five nic blocks: %v", many.checkNICs())
	}
}

// A task's nic blocks reach a real VNF: NIC 0 on its bridge with the asked-for MAC (the VNF's
// own address in stats), NIC 1 unplugged with a generated one.
func TestNICBlocksReachTheVNF(t *testing.T) {
	k := requireVNF(t)
	h, d, _ := newHarness(t)
	bridge(t, "fvtnic0")
	var tc TaskConfig
	hclutils.NewConfigParser(taskConfigSpec).ParseHCL(t, `config {
  nic {
    bridge = "fvtnic0"
    mac    = "fa:16:3e:00:00:0a"
  }
  nic {}
  warm = false
}`, &tc)
	tc.Kernel, tc.ClickConfig = k, forward2
	task := newTask(t, h, "nics", &tc)
	_, state := startTask(t, h, task)
	nics := state.Spec.Nics
	if len(nics) != 2 || nics[0].MAC != "fa:16:3e:00:00:0a" || nics[0].Bridge == nil ||
		*nics[0].Bridge != "fvtnic0" || nics[1].Bridge != nil {
		t.Fatalf("spec NICs %+v", nics)
	}
	if m := master(nics[0].Tap); m != "fvtnic0" {
		t.Errorf("NIC 0's tap %s is on %q, want fvtnic0", nics[0].Tap, m)
	}
	stats, err := d.VNFStats(task.ID)
	if err != nil {
		t.Fatal(err)
	}
	got := stats["nics"].([]any)
	if len(got) != 2 || got[0].(map[string]any)["mac"] != "fa:16:3e:00:00:0a" ||
		got[1].(map[string]any)["mac"] != nics[1].MAC {
		t.Errorf("the VNF's NICs %v, spec %+v", got, nics)
	}
	if err := h.DestroyTask(task.ID, true); err != nil {
		t.Fatal(err)
	}
}
