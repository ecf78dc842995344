// Copyright 2026 The fluidvim Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// session talks to serve over pipes, one JSON line each way, as bench/energy/nomad_policy.py does.
type session struct {
	t   *testing.T
	in  *io.PipeWriter
	out *bufio.Scanner
}

func newSession(t *testing.T) *session {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- serve(inR, outW, hclog.NewNullLogger()); outW.Close() }()
	t.Cleanup(func() {
		inW.Close()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return &session{t: t, in: inW, out: bufio.NewScanner(outR)}
}

type answer struct {
	OK         bool        `json:"ok"`
	Error      string      `json:"error"`
	Placements []placement `json:"placements"`
	Instances  []string    `json:"instances"`
	MS         *float64    `json:"ms"`
	CPUMS      *float64    `json:"cpu_ms"`
}

func (s *session) ask(req map[string]any) answer {
	s.t.Helper()
	line, _ := json.Marshal(req)
	go s.in.Write(append(line, '\n'))
	if !s.out.Scan() {
		s.t.Fatalf("no reply to %s: %v", line, s.out.Err())
	}
	var a answer
	if err := json.Unmarshal(s.out.Bytes(), &a); err != nil {
		s.t.Fatalf("reply %q: %v", s.out.Text(), err)
	}
	return a
}

func (s *session) must(req map[string]any) answer {
	s.t.Helper()
	a := s.ask(req)
	if a.Error != "" {
		s.t.Fatalf("%v: %s", req["op"], a.Error)
	}
	return a
}

// hosts: n hosts of `cores` cores at 1000 MHz (cores*1000 shares) and 64 GiB, ids h0..h(n-1).
func hosts(n, cores int) []map[string]any {
	out := make([]map[string]any, n)
	for i := range out {
		out[i] = map[string]any{"id": fmt.Sprintf("h%d", i), "cores": cores, "mhz": 1000, "memory_mb": 65536}
	}
	return out
}

func (s *session) start(algorithm string, fleet []map[string]any) {
	s.t.Helper()
	s.must(map[string]any{"op": "start", "algorithm": algorithm, "seed": 7, "hosts": fleet})
}

// place asks for instances of a 1000-MHz service (one core of the test hosts).
func (s *session) place(service string, ids ...string) []placement {
	s.t.Helper()
	a := s.must(map[string]any{"op": "place", "service": service, "cpu_mhz": 1000, "memory_mb": 64,
		"count": len(ids), "instances": ids})
	if len(a.Placements) != len(ids) || a.MS == nil || a.CPUMS == nil {
		s.t.Fatalf("place %v: %+v", ids, a)
	}
	for i, p := range a.Placements {
		if p.Instance != ids[i] {
			s.t.Fatalf("placement %d is for %q, asked %q", i, p.Instance, ids[i])
		}
	}
	return a.Placements
}

func hostOf(p placement) string {
	if p.Host == nil {
		return "<refused>"
	}
	return *p.Host
}

// Each instance its own service (no job anti-affinity between them), on two 4-core hosts:
// with two nodes Nomad's limit (max(2, log2 n)) scores both, and binpack takes the fuller one.
func TestBinpackFillsOneNodeBeforeTheNext(t *testing.T) {
	s := newSession(t)
	s.start("binpack", hosts(2, 4))
	var got []string
	for i := 0; i < 8; i++ {
		got = append(got, hostOf(s.place(fmt.Sprintf("svc%d", i), fmt.Sprintf("i%d", i))[0]))
	}
	first := got[0]
	for i, h := range got {
		if (i < 4) != (h == first) {
			t.Fatalf("binpack placed %v; want 4 on one host, then 4 on the other", got)
		}
	}
}

func TestSpreadSpreads(t *testing.T) {
	s := newSession(t)
	s.start("spread", hosts(2, 4))
	per := map[string]int{}
	for i := 0; i < 8; i++ {
		per[hostOf(s.place(fmt.Sprintf("svc%d", i), fmt.Sprintf("i%d", i))[0])]++
		if d := per["h0"] - per["h1"]; d > 1 || d < -1 {
			t.Fatalf("after %d placements spread has %v; want the emptier host each time", i+1, per)
		}
	}
}

// One request that no node fits is refused; a request larger than the fleet is placed as far
// as it fits and the rest refused; what a stop frees is used again.
func TestRefusedWhenNothingFits(t *testing.T) {
	s := newSession(t)
	s.start("binpack", hosts(2, 2))
	big := s.must(map[string]any{"op": "place", "service": "big", "cpu_mhz": 2500, "memory_mb": 64,
		"instances": []string{"b0"}})
	if big.Placements[0].Host != nil {
		t.Fatalf("a 2500-MHz instance on 2000-MHz hosts was placed on %s", *big.Placements[0].Host)
	}
	ps := s.place("fw", "a", "b", "c", "d", "e", "f")
	placed := map[string]string{}
	for _, p := range ps {
		if p.Host != nil {
			placed[p.Instance] = *p.Host
		}
	}
	if len(placed) != 4 {
		t.Fatalf("4 one-core instances fit on 2x2 cores, placed %v", ps)
	}
	if p := s.place("fw", "g")[0]; p.Host != nil {
		t.Fatalf("the full fleet took g on %s", *p.Host)
	}
	var victim string
	for id := range placed {
		victim = id
		break
	}
	s.must(map[string]any{"op": "stop", "instances": []string{victim}})
	if p := s.place("fw", "h")[0]; hostOf(p) != placed[victim] {
		t.Fatalf("after stopping %s on %s, h went to %s", victim, placed[victim], hostOf(p))
	}
}

// An ineligible node takes nothing; eligible again, it takes what no longer fits elsewhere.
func TestIneligibleNodeGetsNothing(t *testing.T) {
	for _, algorithm := range []string{"binpack", "spread"} {
		t.Run(algorithm, func(t *testing.T) {
			s := newSession(t)
			s.start(algorithm, hosts(3, 2))
			s.must(map[string]any{"op": "eligible", "host": "h1", "eligible": false})
			ps := s.place("fw", "a", "b", "c", "d", "e")
			for i, p := range ps {
				want := i < 4
				if (p.Host != nil) != want || hostOf(p) == "h1" {
					t.Fatalf("h1 ineligible, 4 cores elsewhere: got %v", ps)
				}
			}
			s.must(map[string]any{"op": "eligible", "host": "h1", "eligible": true})
			if p := s.place("fw", "e")[0]; hostOf(p) != "h1" {
				t.Fatalf("h1 eligible again and the only one with room: e went to %s", hostOf(p))
			}
		})
	}
}

func TestScaleInReturnsPlacedInstances(t *testing.T) {
	s := newSession(t)
	s.start("binpack", hosts(3, 4))
	ids := []string{"a", "b", "c", "d", "e", "f"}
	host := map[string]string{}
	for _, p := range s.place("fw", ids...) {
		host[p.Instance] = hostOf(p)
	}
	a := s.must(map[string]any{"op": "scale_in", "service": "fw", "n": 2})
	if len(a.Instances) != 2 || a.Instances[0] == a.Instances[1] || a.MS == nil {
		t.Fatalf("scale_in 2: %+v", a)
	}
	for _, id := range a.Instances {
		if _, ok := host[id]; !ok {
			t.Fatalf("scale_in returned %q, never placed (placed %v)", id, ids)
		}
		if e := s.ask(map[string]any{"op": "stop", "instances": []string{id}}); !strings.Contains(e.Error, "not a placed instance") {
			t.Fatalf("stop of scaled-in %q: %+v", id, e)
		}
	}
	if e := s.ask(map[string]any{"op": "scale_in", "service": "fw", "n": 5}); !strings.Contains(e.Error, "scale_in: n: 5") {
		t.Fatalf("scale_in beyond the 4 left: %+v", e)
	}
	// the count went down with the instances: a new placement is one more, not a replacement
	if ps := s.place("fw", "g"); ps[0].Host == nil {
		t.Fatalf("g refused: %+v", ps)
	}
	b := s.must(map[string]any{"op": "scale_in", "service": "fw", "n": 5})
	if len(b.Instances) != 5 {
		t.Fatalf("scale_in of all 5 left: %+v", b)
	}
}

func TestBadRequestsNameTheField(t *testing.T) {
	s := newSession(t)
	cases := []struct {
		req  map[string]any
		want string
	}{
		{map[string]any{"op": "place", "service": "fw"}, "place: no fleet"},
		{map[string]any{"op": "start", "algorithm": "firstfit", "hosts": hosts(1, 1)}, "start: algorithm: \"firstfit\""},
		{map[string]any{"op": "start", "algorithm": "binpack", "hosts": []map[string]any{{"id": "x", "cores": 0, "mhz": 1, "memory_mb": 1}}}, "start: hosts[0].cores: 0"},
		{map[string]any{"op": "start", "algorithm": "binpack", "hosts": hosts(1, 1), "colour": "red"}, "unknown field \"colour\""},
		{map[string]any{"op": "teleport"}, "op: \"teleport\""},
	}
	for _, c := range cases {
		if a := s.ask(c.req); !strings.Contains(a.Error, c.want) {
			t.Errorf("%v: error %q, want it to contain %q", c.req, a.Error, c.want)
		}
	}
	s.start("binpack", hosts(1, 2))
	for _, c := range []struct {
		req  map[string]any
		want string
	}{
		{map[string]any{"op": "place", "service": "fw", "cpu_mhz": 0, "memory_mb": 64, "instances": []string{"a"}}, "place: cpu_mhz: 0"},
		{map[string]any{"op": "place", "service": "fw", "cpu_mhz": 10, "memory_mb": 64, "count": 2, "instances": []string{"a"}}, "place: count: 2"},
		{map[string]any{"op": "eligible", "host": "nope", "eligible": false}, "eligible: host: \"nope\""},
		{map[string]any{"op": "scale_in", "service": "never", "n": 1}, "scale_in: service: \"never\""},
	} {
		if a := s.ask(c.req); !strings.Contains(a.Error, c.want) {
			t.Errorf("%v: error %q, want it to contain %q", c.req, a.Error, c.want)
		}
	}
}

// SCHEDSIM_CPUPROFILE makes main write a CPU profile pprof reads; unset, nothing is written.
func TestProfile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu.prof")
	t.Setenv("SCHEDSIM_CPUPROFILE", "")
	profile()()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("profile written without SCHEDSIM_CPUPROFILE: %v", err)
	}
	t.Setenv("SCHEDSIM_CPUPROFILE", path)
	stop := profile()
	s := newSession(t)
	s.start("binpack", hosts(2, 4))
	s.must(map[string]any{"op": "place", "service": "fw", "cpu_mhz": 1000, "memory_mb": 64, "instances": []string{"a"}})
	stop()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f) // pprof's format: a gzip'd profile.proto
	if err != nil {
		t.Fatalf("%s is no CPU profile: %v", path, err)
	}
	if body, err := io.ReadAll(zr); err != nil || len(body) == 0 {
		t.Fatalf("%s: %d bytes of profile, %v", path, len(body), err)
	}
}

// BenchmarkPlace: one-instance place requests, 20 services in turn, on fleets of 64-core
// 2000-MHz hosts (as `python -m bench.energy.nomad_policy`); reports Nomad's Process time.
//
//	go test -run - -bench Place -benchtime 2000x ./cmd/schedsim
func BenchmarkPlace(b *testing.B) {
	for _, n := range []int{20, 100, 1000} {
		b.Run(fmt.Sprintf("hosts=%d", n), func(b *testing.B) {
			fleet := make([]hostSpec, n)
			for i := range fleet {
				fleet[i] = hostSpec{ID: fmt.Sprintf("h%04d", i), Cores: 64, MHz: 2000, MemoryMB: 256 << 10}
			}
			sim, err := newSim("binpack", fleet, 0, hclog.NewNullLogger())
			if err != nil {
				b.Fatal(err)
			}
			defer sim.close()
			took, cpu := make([]float64, 0, b.N), make([]float64, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				_, d, err := sim.place(fmt.Sprintf("vnf%d", i%20), serviceShape{CPUMHz: 1000, MemoryMB: 512},
					[]string{fmt.Sprintf("i%d", i)})
				if err != nil {
					b.Fatal(err)
				}
				took, cpu = append(took, ms(d.Wall)), append(cpu, ms(d.CPU))
			}
			sort.Float64s(took)
			sort.Float64s(cpu)
			b.ReportMetric(took[len(took)/2], "process-ms-p50")
			b.ReportMetric(cpu[len(cpu)/2], "process-cpu-ms-p50")
		})
	}
}

// script drives one Sim through a seeded mix of place (some refused: the fleet is small),
// scale_in, stop and eligibility changes, and returns every outcome as a line of text.
func script(t *testing.T, recheck bool) (lines []string, refused int) {
	t.Helper()
	fleet := make([]hostSpec, 6)
	for i := range fleet {
		fleet[i] = hostSpec{ID: fmt.Sprintf("h%d", i), Cores: 2 + i%3*2, MHz: 1000, MemoryMB: 4096}
	}
	sim, err := newSimRecheck("binpack", fleet, 7, recheck, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer sim.close()
	rng := rand.New(rand.NewSource(3))
	live := map[string][]string{}
	next := 0
	for step := 0; step < 120; step++ {
		if !recheck {
			allocsAtJobVersion(t, sim)
		}
		svc := fmt.Sprintf("s%d", rng.Intn(3))
		shape := serviceShape{CPUMHz: 500 + 250*int(svc[1]-'0'), MemoryMB: 256}
		switch op := rng.Intn(10); {
		case op < 5:
			ids := make([]string, 1+rng.Intn(4))
			for i := range ids {
				ids[i], next = fmt.Sprintf("i%d", next), next+1
			}
			out, _, err := sim.place(svc, shape, ids)
			if err != nil {
				t.Fatalf("step %d place: %v", step, err)
			}
			for _, p := range out {
				lines = append(lines, fmt.Sprintf("place %s %s", p.Instance, hostOf(p)))
				if p.Host == nil {
					refused++
				} else {
					live[svc] = append(live[svc], p.Instance)
				}
			}
		case op < 8 && len(live[svc]) > 0:
			ids, _, err := sim.scaleIn(svc, 1+rng.Intn(len(live[svc])))
			if err != nil {
				t.Fatalf("step %d scale_in: %v", step, err)
			}
			sort.Strings(ids)
			lines = append(lines, fmt.Sprintf("scale_in %s %v", svc, ids))
			live[svc] = without(live[svc], ids)
		case op < 9 && len(live[svc]) > 0:
			id := live[svc][rng.Intn(len(live[svc]))]
			if err := sim.stop([]string{id}); err != nil {
				t.Fatalf("step %d stop: %v", step, err)
			}
			live[svc] = without(live[svc], []string{id})
		default:
			if err := sim.setEligible(fleet[rng.Intn(len(fleet))].ID, rng.Intn(3) > 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	return lines, refused
}

// allocsAtJobVersion: what makes recheck off cheap, the allocations are at their job's
// version before every evaluation, so that Nomad's reconciler has nothing to re-check.
func allocsAtJobVersion(t *testing.T, sim *Sim) {
	t.Helper()
	for svc, job := range sim.jobs {
		all, _ := sim.state.AllocsByJob(nil, job.Namespace, svc, true)
		for _, a := range all {
			if a.Job.JobModifyIndex != job.JobModifyIndex {
				t.Fatalf("%s: allocation %s at job index %d, job at %d", svc, a.ID, a.Job.JobModifyIndex, job.JobModifyIndex)
			}
		}
	}
}

func without(ids, gone []string) []string {
	out := ids[:0:0]
	for _, id := range ids {
		if !slices.Contains(gone, id) {
			out = append(out, id)
		}
	}
	return out
}

// recheck off (count changes re-point the allocations instead of Nomad re-checking each in
// place) changes no placement, refusal or scale-in choice of Nomad's.
func TestRecheckOffDecidesTheSame(t *testing.T) {
	with, refused := script(t, true)
	without, _ := script(t, false)
	if refused == 0 || len(with) < 100 {
		t.Fatalf("script too tame: %d outcomes, %d refused; it must fill the fleet", len(with), refused)
	}
	if strings.Join(with, "\n") != strings.Join(without, "\n") {
		for i := range with {
			if i >= len(without) || with[i] != without[i] {
				t.Fatalf("outcome %d: recheck %q, recheck off %q", i, with[i], without[min(i, len(without)-1)])
			}
		}
		t.Fatalf("recheck off: %d outcomes, recheck %d", len(without), len(with))
	}
}
