// Copyright 2026 The fluidvim Authors
// SPDX-License-Identifier: Apache-2.0

package control

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

type protoVectors struct {
	MaxLine  int `json:"max_line"`
	Requests []struct {
		ID     int            `json:"id"`
		Op     string         `json:"op"`
		Fields map[string]any `json:"fields"`
		Line   string         `json:"line"`
	} `json:"requests"`
	GuestLines []struct {
		Line    string `json:"line"`
		Kind    string `json:"kind"`
		Event   string `json:"event"`
		ID      *int64 `json:"id"`
		Code    string `json:"code"`
		ErrLine int    `json:"err_line"`
		ErrCol  int    `json:"err_col"`
		Field   string `json:"field"`
	} `json:"guest_lines"`
	InvalidGuestLines []string `json:"invalid_guest_lines"`
}

func loadVectors(t *testing.T) protoVectors {
	data, err := os.ReadFile("../../contract/vectors/protocol.json")
	if err != nil {
		t.Fatal(err)
	}
	var v protoVectors
	dec := json.NewDecoder(strings.NewReader(string(data)))
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestRequestVectors(t *testing.T) {
	v := loadVectors(t)
	if v.MaxLine != MaxLine {
		t.Errorf("max_line %d, want %d", v.MaxLine, MaxLine)
	}
	for _, r := range v.Requests {
		fields := map[string]any{}
		for k, x := range r.Fields {
			if f, ok := x.(float64); ok { // JSON numbers: the protocol's fields are integers
				x = int(f)
			}
			fields[k] = x
		}
		got, err := EncodeRequest(r.ID, r.Op, fields)
		if err != nil {
			t.Fatalf("%d %s: %v", r.ID, r.Op, err)
		}
		if string(got) != r.Line {
			t.Errorf("request %d %s:\n got %q\nwant %q", r.ID, r.Op, got, r.Line)
		}
	}
}

func TestEncodeEdgeCases(t *testing.T) {
	got, _ := EncodeRequest(1, "configure", map[string]any{"config": "\x7f\U0001F600é</>&\x01", "slots": (*int)(nil)})
	want := `{"id":1,"op":"configure","config":"\u007f\ud83d\ude00\u00e9</>&\u0001"}` + "\n"
	if string(got) != want {
		t.Errorf("got %s want %s", got, want)
	}
	mac := "fa:16:3e:00:00:01"
	for _, macs := range []any{[]*string{&mac, nil}, []any{mac, nil}} {
		got, err := EncodeRequest(2, "configure", map[string]any{"config": "x", "macs": macs})
		want = `{"id":2,"op":"configure","config":"x","macs":["fa:16:3e:00:00:01",null]}` + "\n"
		if err != nil || string(got) != want {
			t.Errorf("macs %T: got %s (%v) want %s", macs, got, err, want)
		}
	}
	got, _ = EncodeRequest(3, "configure", map[string]any{"macs": []string{mac}})
	if want = `{"id":3,"op":"configure","macs":["fa:16:3e:00:00:01"]}` + "\n"; string(got) != want {
		t.Errorf("got %s want %s", got, want)
	}
	if _, err := EncodeRequest(1, "dance", nil); err == nil {
		t.Error("unknown op accepted")
	}
	if _, err := EncodeRequest(1, "configure", map[string]any{"config": strings.Repeat("x", 9000)}); err == nil {
		t.Error("over-long line accepted")
	}
}

func TestGuestLineVectors(t *testing.T) {
	v := loadVectors(t)
	for _, g := range v.GuestLines {
		m, err := DecodeLine([]byte(g.Line))
		if err != nil {
			t.Fatalf("%s: %v", g.Line, err)
		}
		if m.Kind != g.Kind {
			t.Errorf("%s: kind %s, want %s", g.Line, m.Kind, g.Kind)
		}
		if g.Kind == KindEvent && m.Event != g.Event {
			t.Errorf("%s: event %s, want %s", g.Line, m.Event, g.Event)
		}
		if g.Kind != KindEvent {
			if (g.ID == nil) != (m.ID == nil) || (g.ID != nil && *g.ID != *m.ID) {
				t.Errorf("%s: id %v, want %v", g.Line, m.ID, g.ID)
			}
		}
		if g.Kind == KindError {
			if m.Err.Code != g.Code || m.Err.Line != g.ErrLine || m.Err.Col != g.ErrCol || m.Err.Field != g.Field {
				t.Errorf("%s: error %+v, want code %s line %d col %d field %q", g.Line, m.Err, g.Code,
					g.ErrLine, g.ErrCol, g.Field)
			}
		}
	}
	for _, l := range v.InvalidGuestLines {
		if m, err := DecodeLine([]byte(l)); err == nil {
			t.Errorf("%q decoded as %+v, want an error", l, m)
		}
	}
}

// socketpair returns the client end and the fake guest end.
func socketpair(t *testing.T) (net.Conn, net.Conn) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	conns := make([]net.Conn, 2)
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "socketpair")
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		conns[i] = c
	}
	return conns[0], conns[1]
}

func TestClientAgainstFakeGuest(t *testing.T) {
	cc, gc := socketpair(t)
	defer gc.Close()
	c := NewClient(cc, "fake")
	defer c.Close()
	errs := make(chan error, 1)
	go func() {
		errs <- func() error {
			w := func(s string) { gc.Write([]byte(s)) }
			// the tail of a previous client's line, an id-less error and a boot error event
			w(`ly":1}}` + "\n" + `{"ok":false,"error":{"code":"parse","message":"x"}}` + "\n")
			w(`{"ev":"error","message":"virtio-net 1: queue 0 size 0"}` + "\n")
			w(`{"ev":"ready","proto":1,"name":"vnf","ctl":"virtio","nics":0,"macs":[],"slots":16}` + "\n")
			r := bufio.NewReader(gc)
			line, err := r.ReadString('\n')
			if err != nil {
				return err
			}
			if line != "\n" {
				return errors.New("first request not preceded by an empty line: " + line)
			}
			line, _ = r.ReadString('\n')
			if line != `{"id":1,"op":"ping"}`+"\n" {
				return errors.New("bad ping " + line)
			}
			// a stale reply, then the real one split in two writes
			w(`{"id":99,"ok":true,"result":{}}` + "\n" + `{"id":1,"ok":tr`)
			time.Sleep(20 * time.Millisecond)
			w(`ue,"result":{"pong":true,"uptime_us":5,"configured":false,"boot_us":1}}` + "\n")
			line, _ = r.ReadString('\n')
			if !strings.HasPrefix(line, `{"id":2,"op":"configure","config":"FromDevice(0) -> Countr;"`) {
				return errors.New("bad configure " + line)
			}
			w(`{"id":2,"ok":false,"error":{"code":"config","line":1,"col":17,"message":"unknown element class 'Countr'"}}` + "\n")
			line, _ = r.ReadString('\n')
			if line != `{"id":3,"op":"stats"}`+"\n" {
				return errors.New("bad stats " + line)
			}
			w(`{"id":3,"ok":true,"result":{"slots":{"total":16,"used":0,"free":16,"rejected":0}}}` + "\n")
			r.ReadString('\n') // the ping that will time out
			return nil
		}()
	}()
	ready, err := c.WaitReady(2 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if ready["name"] != "vnf" || len(c.Events) != 1 {
		t.Errorf("ready %v events %v", ready, c.Events)
	}
	res, err := c.Ping(2 * time.Second)
	if err != nil || res["pong"] != true {
		t.Fatalf("ping %v %v", res, err)
	}
	_, err = c.Configure("FromDevice(0) -> Countr;", 0, 2*time.Second)
	var ce *Error
	if !errors.As(err, &ce) || ce.Code != "config" || ce.Line != 1 || ce.Col != 17 {
		t.Fatalf("configure error %v", err)
	}
	st, err := c.Stats(2 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if st["slots"].(map[string]any)["free"].(json.Number).String() != "16" {
		t.Errorf("stats %v", st)
	}
	_, err = c.Ping(100 * time.Millisecond)
	if !errors.As(err, &ce) || ce.Code != "timeout" {
		t.Errorf("want timeout, got %v", err)
	}
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	gc.Close()
	if _, err := c.Ping(time.Second); !errors.Is(err, ErrClosed) {
		t.Errorf("want closed, got %v", err)
	}
}

// A `ready` lost before QEMU accepted the connection: WaitReady pings (id 0) and the reply
// stands in for it; a silent guest still times out.
func TestWaitReadyRecoversALostReadyWithAPing(t *testing.T) {
	old := ReadyPingAfter
	ReadyPingAfter = 50 * time.Millisecond
	defer func() { ReadyPingAfter = old }()
	cc, gc := socketpair(t)
	defer gc.Close()
	c := NewClient(cc, "fake")
	defer c.Close()
	got := make(chan string, 1)
	go func() {
		r := bufio.NewReader(gc)
		r.ReadString('\n') // the empty line of a fresh connection
		line, _ := r.ReadString('\n')
		got <- line
		gc.Write([]byte(`{"id":0,"ok":true,"result":{"pong":true,"uptime_us":40000,"configured":false,"boot_us":33868}}` + "\n"))
	}()
	ready, err := c.WaitReady(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if <-got != `{"id":0,"op":"ping"}`+"\n" {
		t.Error("no ping with id 0")
	}
	if ready["late"] != true || fmt.Sprint(ready["boot_us"]) != "33868" {
		t.Errorf("ready = %v", ready)
	}

	cc2, gc2 := socketpair(t)
	defer gc2.Close()
	silent := NewClient(cc2, "silent")
	defer silent.Close()
	if _, err := silent.WaitReady(300 * time.Millisecond); err == nil || !strings.Contains(err.Error(), "'ready' event") {
		t.Errorf("silent guest: err = %v", err)
	}
}
