// Copyright 2026 The fluidvim Authors
// SPDX-License-Identifier: Apache-2.0

// Package control is the Go twin of vnf/control.py: a client for the VNF control channel,
// line-delimited JSON over a unix socket (contract/PROTOCOL.md). EncodeRequest and DecodeLine are
// plain functions pinned by contract/vectors/protocol.json; Client adds the socket.
package control

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net"
	"os"
	"sort"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/fluidvim/fluidvim/nomad_driver/spec"
)

const (
	MaxLine      = spec.MaxControlLine // vnf/limits.py MAX_CONTROL_LINE
	ProtoVersion = 1
)

var Ops = []string{"ping", "configure", "stats", "qoe", "poll"}

// Error is an error reply from the VNF, or a failed channel (Code "closed", "timeout",
// "protocol").
type Error struct {
	Code    string
	Message string
	Line    int
	Col     int
	Field   string // the request field at fault when it is not the config text (e.g. "macs[1]")
}

func (e *Error) Error() string {
	where := ""
	if e.Line != 0 {
		where = fmt.Sprintf(" (line %d, column %d)", e.Line, e.Col)
	}
	return e.Code + ": " + e.Message + where
}

// ErrClosed is matched (errors.Is) by every "channel closed" error.
var ErrClosed = errors.New("control channel closed")

func closedErr(msg string) error {
	if msg == "" {
		msg = "control channel closed: the VNF (or its QEMU) has exited"
	}
	return &Error{Code: "closed", Message: msg}
}

// Is makes errors.Is(err, ErrClosed) true for a closed channel.
func (e *Error) Is(target error) bool { return target == ErrClosed && e.Code == "closed" }

// appendString writes s as a JSON string the way Python's json.dumps(ensure_ascii=True) does.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	for _, r := range s { // invalid UTF-8 becomes U+FFFD
		switch r {
		case '"':
			b = append(b, '\\', '"')
		case '\\':
			b = append(b, '\\', '\\')
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		case '\b':
			b = append(b, '\\', 'b')
		case '\f':
			b = append(b, '\\', 'f')
		default:
			switch {
			case r < 0x20 || (r >= 0x7f && r < 0x10000): // Python escapes [^ -~]
				b = fmt.Appendf(b, "\\u%04x", r)
			case r >= 0x10000:
				r -= 0x10000
				b = fmt.Appendf(b, "\\u%04x\\u%04x", 0xd800+(r>>10), 0xdc00+(r&0x3ff))
			default:
				b = append(b, byte(r))
			}
		}
	}
	return append(b, '"')
}

func appendValue(b []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case string:
		return appendString(b, x), nil
	case *string:
		return appendString(b, *x), nil
	case int:
		return strconv.AppendInt(b, int64(x), 10), nil
	case *int:
		return strconv.AppendInt(b, int64(*x), 10), nil
	case int64:
		return strconv.AppendInt(b, x, 10), nil
	case bool:
		return strconv.AppendBool(b, x), nil
	case []string: // e.g. configure's macs
		items := make([]any, len(x))
		for i, s := range x {
			items[i] = s
		}
		return appendValue(b, items)
	case []*string: // macs with nil = keep that NIC's MAC
		items := make([]any, len(x))
		for i, s := range x {
			if s != nil {
				items[i] = *s
			}
		}
		return appendValue(b, items)
	case []any:
		b = append(b, '[')
		for i, item := range x {
			if i > 0 {
				b = append(b, ',')
			}
			if isNil(item) {
				b = append(b, "null"...)
				continue
			}
			var err error
			if b, err = appendValue(b, item); err != nil {
				return nil, fmt.Errorf("item %d: %w", i, err)
			}
		}
		return append(b, ']'), nil
	default:
		return nil, fmt.Errorf("unsupported request field type %T", v)
	}
}

func isNil(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case *string:
		return x == nil
	case *int:
		return x == nil
	}
	return false
}

// EncodeRequest is one request line: {"id":N,"op":OP,<fields sorted>}\n, compact, ASCII-only.
// Nil fields are left out (Python's None).
func EncodeRequest(id int, op string, fields map[string]any) ([]byte, error) {
	ok := false
	for _, o := range Ops {
		ok = ok || o == op
	}
	if !ok {
		return nil, fmt.Errorf("unknown op %q (known: ping, configure, stats, qoe)", op)
	}
	b := fmt.Appendf(nil, `{"id":%d,"op":`, id)
	b = appendString(b, op)
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if isNil(fields[k]) {
			continue
		}
		b = append(b, ',')
		b = appendString(b, k)
		b = append(b, ':')
		var err error
		if b, err = appendValue(b, fields[k]); err != nil {
			return nil, fmt.Errorf("field %s: %w", k, err)
		}
	}
	b = append(b, '}', '\n')
	if len(b) > MaxLine {
		return nil, fmt.Errorf("request is %d bytes; the control channel carries at most %d "+
			"bytes per line (shorten the click config)", len(b), MaxLine)
	}
	return b, nil
}

// Kind of a guest line.
const (
	KindEvent = "event"
	KindReply = "reply"
	KindError = "error"
)

// Message is one decoded guest line.
type Message struct {
	Kind   string
	Event  string         // KindEvent: the "ev" value
	Body   map[string]any // KindEvent: the whole object
	ID     *int64         // KindReply / KindError: nil when the reply has no (integer) id
	Result map[string]any // KindReply
	Err    *Error         // KindError
}

func truthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case json.Number:
		f, _ := x.Float64()
		return f != 0
	case string:
		return x != ""
	case []any:
		return len(x) > 0
	case map[string]any:
		return len(x) > 0
	}
	return true
}

func intOf(v any) (int64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	i, err := n.Int64()
	return i, err == nil
}

// DecodeLine parses one guest line (without its newline) like control.decode_line.
func DecodeLine(line []byte) (*Message, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, &Error{Code: "protocol", Message: "guest sent a line that is not JSON: " + err.Error()}
	}
	if _, err := dec.Token(); err == nil {
		return nil, &Error{Code: "protocol", Message: "guest sent a line that is not JSON: extra data"}
	}
	msg, ok := v.(map[string]any)
	if !ok {
		return nil, &Error{Code: "protocol", Message: "guest sent JSON that is not an object"}
	}
	if ev, ok := msg["ev"]; ok {
		s, _ := ev.(string)
		return &Message{Kind: KindEvent, Event: s, Body: msg}, nil
	}
	okv, ok := msg["ok"]
	if !ok {
		return nil, &Error{Code: "protocol", Message: "guest line has neither 'ev' nor 'ok'"}
	}
	m := &Message{}
	if id, ok := intOf(msg["id"]); ok {
		m.ID = &id
	}
	if truthy(okv) {
		m.Kind = KindReply
		m.Result, _ = msg["result"].(map[string]any)
		if m.Result == nil {
			m.Result = map[string]any{}
		}
		return m, nil
	}
	m.Kind = KindError
	e, _ := msg["error"].(map[string]any)
	m.Err = &Error{Code: "unknown"}
	if c, ok := e["code"].(string); ok {
		m.Err.Code = c
	}
	m.Err.Message, _ = e["message"].(string)
	if l, ok := intOf(e["line"]); ok {
		m.Err.Line = int(l)
	}
	if c, ok := intOf(e["col"]); ok {
		m.Err.Col = int(c)
	}
	m.Err.Field, _ = e["field"].(string)
	return m, nil
}

// Client is a connection to one VNF's control socket. Safe for concurrent use; one request at
// a time.
type Client struct {
	Path   string
	conn   net.Conn
	buf    []byte
	nextID int
	fresh  bool
	mu     sync.Mutex
	Ready  map[string]any   // the `ready` event, once seen
	Events []map[string]any // other events (boot errors)
}

// Dial connects to a control socket.
func Dial(path string) (*Client, error) {
	c, err := net.Dial("unix", path)
	if err != nil {
		return nil, err
	}
	cl := NewClient(c, path)
	// A reply the VNF sends after its client gave up (a stopped QEMU answering late) reaches
	// whoever connects next; ids that start at random on each connection keep it from matching
	// this client's request with the same number (contract/PROTOCOL.md §2).
	cl.nextID = 1 + rand.Intn(0x7FFFFFFE)
	return cl, nil
}

// NewClient wraps an open connection (tests: one end of a socketpair).
func NewClient(conn net.Conn, path string) *Client {
	return &Client{Path: path, conn: conn, nextID: 1, fresh: true}
}

// Close closes the connection.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn == nil {
		return nil
	}
	err := c.conn.Close()
	c.conn = nil
	return err
}

func (c *Client) readLine(deadline time.Time, what string, timeout time.Duration) ([]byte, error) {
	chunk := make([]byte, 65536)
	for {
		if i := bytes.IndexByte(c.buf, '\n'); i >= 0 {
			line := c.buf[:i:i]
			c.buf = c.buf[i+1:]
			return line, nil
		}
		if err := c.conn.SetReadDeadline(deadline); err != nil {
			return nil, closedErr("control channel failed: " + err.Error())
		}
		n, err := c.conn.Read(chunk)
		c.buf = append(c.buf, chunk[:n]...)
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return nil, &Error{Code: "timeout", Message: fmt.Sprintf("no %s from the VNF "+
					"within %.1f s", what, timeout.Seconds())}
			}
			if n == 0 {
				if errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF) {
					return nil, closedErr("")
				}
				return nil, closedErr("control channel failed: " + err.Error())
			}
		}
		if len(c.buf) > 4*MaxLine && bytes.IndexByte(c.buf, '\n') < 0 {
			return nil, &Error{Code: "protocol", Message: "guest sent an over-long line"}
		}
	}
}

// nextMessage skips fragments (the tail of a line meant for a previous client) and error
// replies without an id (answers to such fragments), as PROTOCOL.md §2 asks.
func (c *Client) nextMessage(deadline time.Time, what string, timeout time.Duration) (*Message, error) {
	for {
		line, err := c.readLine(deadline, what, timeout)
		if err != nil {
			return nil, err
		}
		m, err := DecodeLine(line)
		if err != nil {
			continue
		}
		if m.Kind == KindError && m.ID == nil {
			continue
		}
		return m, nil
	}
}

func (c *Client) noteEvent(m *Message) {
	if m.Event == "ready" {
		c.Ready = m.Body
	} else {
		c.Events = append(c.Events, m.Body)
	}
}

// ReadyPingAfter is how long WaitReady waits for `ready` before asking with a ping whether it
// was lost (see WaitReady). A variable for tests.
var ReadyPingAfter = 2 * time.Second

// WaitReady blocks until the VNF's own `ready` event arrives (a fresh boot).
//
// QEMU accepts the launcher's pending connection on the control socket in its main loop,
// asynchronously; a guest that sends `ready` before that has its event discarded (PROTOCOL.md
// §1; seen under CPU contention). So after ReadyPingAfter without `ready`, WaitReady sends a
// ping (id 0): the guest answers requests only after sending `ready`, so a reply without a
// `ready` before it means the event was lost, and the reply's boot_us stands in
// ({"boot_us": N, "late": true}). Same contract as vnf/control.py.
func (c *Client) WaitReady(timeout time.Duration) (map[string]any, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.Ready != nil {
		return c.Ready, nil
	}
	if c.conn == nil {
		return nil, closedErr("control channel is not connected")
	}
	deadline := time.Now().Add(timeout)
	pingAt := time.Now().Add(min(ReadyPingAfter, timeout))
	for c.Ready == nil {
		wait := deadline
		if pingAt.Before(deadline) {
			wait = pingAt
		}
		m, err := c.nextMessage(wait, "'ready' event", timeout)
		if err != nil {
			var e *Error
			if errors.As(err, &e) && e.Code == "timeout" && pingAt.Before(deadline) {
				pingAt = deadline
				if err := c.send(0, "ping", nil, deadline); err != nil {
					return nil, err
				}
				continue
			}
			return nil, err
		}
		switch {
		case m.Kind == KindEvent:
			c.noteEvent(m)
		case m.Kind == KindReply && m.ID != nil && *m.ID == 0:
			c.Ready = map[string]any{"boot_us": m.Result["boot_us"], "late": true}
		}
	}
	return c.Ready, nil
}

// send writes one request line (with the leading newline on a fresh connection).
func (c *Client) send(id int, op string, fields map[string]any, deadline time.Time) error {
	line, err := EncodeRequest(id, op, fields)
	if err != nil {
		return err
	}
	if c.fresh {
		// end any partial line a previous client left in the VNF's input buffer
		line = append([]byte{'\n'}, line...)
		c.fresh = false
	}
	_ = c.conn.SetWriteDeadline(deadline)
	if _, err := c.conn.Write(line); err != nil {
		return closedErr("control channel failed: " + err.Error())
	}
	return nil
}

// Request sends one request and returns its result; an error reply is returned as *Error.
func (c *Client) Request(op string, fields map[string]any, timeout time.Duration) (map[string]any, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn == nil {
		return nil, closedErr("control channel is not connected")
	}
	id := c.nextID
	c.nextID = c.nextID%0x7FFFFFFF + 1
	if err := c.send(id, op, fields, time.Now().Add(timeout)); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(timeout)
	for {
		m, err := c.nextMessage(deadline, fmt.Sprintf("reply to '%s'", op), timeout)
		if err != nil {
			return nil, err
		}
		if m.Kind == KindEvent {
			c.noteEvent(m)
			continue
		}
		if m.ID == nil || *m.ID != int64(id) {
			continue // a stale reply to a request that timed out earlier
		}
		if m.Kind == KindError {
			return nil, m.Err
		}
		return m.Result, nil
	}
}

// Ping is used to re-attach (a VNF that booted earlier does not repeat `ready`).
func (c *Client) Ping(timeout time.Duration) (map[string]any, error) {
	return c.Request("ping", nil, timeout)
}

// Configure sends a click config; slots <= 0 keeps the current session slots.
func (c *Client) Configure(config string, slots int, timeout time.Duration) (map[string]any, error) {
	return c.ConfigureMACs(config, slots, nil, timeout)
}

// ConfigureMACs is Configure with `macs`: one entry per NIC, nil = keep that NIC's MAC; a nil
// slice sends no `macs` (contract/PROTOCOL.md §4, a warm claim's §6.4).
func (c *Client) ConfigureMACs(config string, slots int, macs []*string, timeout time.Duration) (map[string]any, error) {
	f := map[string]any{"config": config}
	if slots > 0 {
		f["slots"] = slots
	}
	if macs != nil {
		f["macs"] = macs
	}
	return c.Request("configure", f, timeout)
}

// QoE sets the VNF's session slots at the service's QoE (contract/PROTOCOL.md §4 `qoe`) with
// the fields of QoEFields.
func (c *Client) QoE(capacity int, budgetNS int64, quantilePPM int, waitPPM int64,
	timeout time.Duration) (map[string]any, error) {
	return c.Request("qoe", QoEFields(capacity, budgetNS, quantilePPM, waitPPM), timeout)
}

// QoEFields is the `qoe` request's fields: capacity 0 turns it off (budgetNS, quantilePPM and
// waitPPM are then not sent); waitPPM 0 = no host-wait rule (not sent). The Python launch core
// sends the same for the same QoE (contract/vectors/qoe.json).
func QoEFields(capacity int, budgetNS int64, quantilePPM int, waitPPM int64) map[string]any {
	f := map[string]any{"capacity": capacity}
	if capacity > 0 {
		f["budget_ns"], f["quantile_ppm"] = budgetNS, quantilePPM
		if waitPPM > 0 {
			f["wait_ppm"] = waitPPM
		}
	}
	return f
}

// Stats returns the VNF's counters.
func (c *Client) Stats(timeout time.Duration) (map[string]any, error) {
	return c.Request("stats", nil, timeout)
}

// ValidUTF8 reports whether a config can be sent as is (Python strings are always valid).
func ValidUTF8(s string) bool { return utf8.ValidString(s) }
