// Copyright 2026 The fluidvim Authors
// SPDX-License-Identifier: Apache-2.0

// Command schedsim runs Nomad's own service scheduler (github.com/hashicorp/nomad/scheduler,
// the version the plugin links) in process over a simulated fleet, for bench/energy
// (bench/energy/nomad_policy.py). Nothing is re-implemented: nodes and jobs are Nomad structs
// in Nomad's state store, each request is a job registration or scale and one evaluation
// processed by NewServiceScheduler, plans applied by the PlanBuilder of the scheduler's test
// harness; binpack or spread is the cluster's SchedulerConfiguration.
//
// JSON lines on stdin, one reply line on stdout per request:
//
//	{"op":"start","algorithm":"binpack"|"spread","seed":0,"hosts":[{"id","cores","mhz","memory_mb"}],
//	 "recheck":true}
//	    -> {"ok":true}        a new cluster; node cpu = cores*mhz shares, nothing reserved;
//	                          recheck false (default true): count changes do not make Nomad
//	                          re-check every running allocation (same decisions; Sim.repoint)
//	{"op":"place","service":"fw","cpu_mhz":500,"memory_mb":64,"count":2,"instances":["a","b"]}
//	    -> {"placements":[{"instance":"a","host":"h1"},{"instance":"b","host":null}],"ms":1.2,"cpu_ms":1.1}
//	{"op":"scale_in","service":"fw","n":1}      -> {"instances":["b"],"ms":0.8,"cpu_ms":0.8}
//	(ms, cpu_ms: the evaluation's Scheduler.Process, wall clock and this process's CPU time)
//	{"op":"stop","instances":["a"]}             -> {"ok":true}
//	{"op":"eligible","host":"h1","eligible":false} -> {"ok":true}
//	{"op":"close"}                              -> {"ok":true}, then exit
//
// A bad request gets {"error":"<op>: <field>: <what is wrong; the fix>"} and the process goes on.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"time"

	"github.com/hashicorp/go-hclog"
)

type request struct {
	Op        string     `json:"op"`
	Algorithm string     `json:"algorithm"`
	Seed      int64      `json:"seed"`
	Hosts     []hostSpec `json:"hosts"`
	Service   string     `json:"service"`
	CPUMHz    int        `json:"cpu_mhz"`
	MemoryMB  int        `json:"memory_mb"`
	Count     *int       `json:"count"`
	Instances []string   `json:"instances"`
	N         int        `json:"n"`
	Host      string     `json:"host"`
	Eligible  *bool      `json:"eligible"`
	Recheck   *bool      `json:"recheck"`
}

type reply map[string]any

var ok = reply{"ok": true}

// server holds the current cluster between requests.
type server struct {
	sim    *Sim
	logger hclog.Logger
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func (sv *server) start(r request) (reply, error) {
	sim, err := newSimRecheck(r.Algorithm, r.Hosts, r.Seed, r.Recheck == nil || *r.Recheck, sv.logger)
	if err != nil {
		return nil, err
	}
	if sv.sim != nil {
		sv.sim.close()
	}
	sv.sim = sim
	return ok, nil
}

func (sv *server) place(r request) (reply, error) {
	if r.Count != nil && *r.Count != len(r.Instances) {
		return nil, fmt.Errorf("count: %d but %d instances; give one id per instance", *r.Count, len(r.Instances))
	}
	out, took, err := sv.sim.place(r.Service, serviceShape{CPUMHz: r.CPUMHz, MemoryMB: r.MemoryMB}, r.Instances)
	if err != nil {
		return nil, err
	}
	return reply{"placements": out, "ms": ms(took.Wall), "cpu_ms": ms(took.CPU)}, nil
}

func (sv *server) scaleIn(r request) (reply, error) {
	ids, took, err := sv.sim.scaleIn(r.Service, r.N)
	if err != nil {
		return nil, err
	}
	return reply{"instances": ids, "ms": ms(took.Wall), "cpu_ms": ms(took.CPU)}, nil
}

func (sv *server) stop(r request) (reply, error) {
	return ok, sv.sim.stop(r.Instances)
}

func (sv *server) eligible(r request) (reply, error) {
	if r.Eligible == nil {
		return nil, fmt.Errorf("eligible: missing; true or false")
	}
	return ok, sv.sim.setEligible(r.Host, *r.Eligible)
}

// handle dispatches one request; the error names the op.
func (sv *server) handle(r request) (reply, error) {
	ops := map[string]func(request) (reply, error){
		"start": sv.start, "place": sv.place, "scale_in": sv.scaleIn, "stop": sv.stop, "eligible": sv.eligible,
	}
	fn, known := ops[r.Op]
	if !known {
		return nil, fmt.Errorf("op: %q; use start, place, scale_in, stop, eligible or close", r.Op)
	}
	if r.Op != "start" && sv.sim == nil {
		return nil, fmt.Errorf("%s: no fleet; send {\"op\":\"start\",...} first", r.Op)
	}
	rep, err := fn(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r.Op, err)
	}
	return rep, nil
}

// decode parses one line strictly: an unknown field is an error naming it.
func decode(line []byte) (request, error) {
	var r request
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return r, fmt.Errorf("request: %v; one JSON object per line, fields as in `go doc` of schedsim", err)
	}
	return r, nil
}

// serve answers requests from in on out until close or EOF.
func serve(in io.Reader, out io.Writer, logger hclog.Logger) error {
	sv := &server{logger: logger}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	enc := json.NewEncoder(out)
	for sc.Scan() {
		if len(sc.Bytes()) == 0 {
			continue
		}
		r, err := decode(sc.Bytes())
		var rep reply
		if err == nil {
			if r.Op == "close" {
				return enc.Encode(ok)
			}
			rep, err = sv.handle(r)
		}
		if err != nil {
			rep = reply{"error": err.Error()}
		}
		if err := enc.Encode(rep); err != nil {
			return err
		}
	}
	return sc.Err()
}

// profile starts a CPU profile into $SCHEDSIM_CPUPROFILE when it is set (to find where a
// step's time goes: `go tool pprof schedsim $SCHEDSIM_CPUPROFILE`); the returned stop writes it.
func profile() func() {
	path := os.Getenv("SCHEDSIM_CPUPROFILE")
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "schedsim: SCHEDSIM_CPUPROFILE:", err)
		os.Exit(2)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }
}

// trace tees every request line and every reply line into $SCHEDSIM_TRACE when it is set
// (requests into the file, replies into the file + ".out"): a recorded day that replays
// through schedsim (`schedsim < trace`) to profile it or to compare two builds' decisions.
func trace(in io.Reader, out io.Writer) (io.Reader, io.Writer, func()) {
	path := os.Getenv("SCHEDSIM_TRACE")
	if path == "" {
		return in, out, func() {}
	}
	req, err := os.Create(path)
	var rep *os.File
	if err == nil {
		rep, err = os.Create(path + ".out")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "schedsim: SCHEDSIM_TRACE:", err)
		os.Exit(2)
	}
	return io.TeeReader(in, req), io.MultiWriter(out, rep), func() { req.Close(); rep.Close() }
}

func main() {
	logger := hclog.New(&hclog.LoggerOptions{Name: "schedsim", Level: hclog.Warn, Output: os.Stderr})
	stop := profile()
	in, out, closeTrace := trace(os.Stdin, os.Stdout)
	err := serve(in, out, logger) // one Write per reply line
	stop()
	closeTrace()
	if err != nil {
		fmt.Fprintln(os.Stderr, "schedsim:", err)
		os.Exit(1)
	}
}
