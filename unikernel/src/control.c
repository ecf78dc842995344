/* fluidvim VNF — control channel: line-delimited JSON over the virtio-console (port 0) if there
 * is one, else over COM2. Framing is the same on both: bytes are assembled into lines of at most
 * MAX_LINE bytes; a partial line left without new bytes for STALE_US (a client that died
 * mid-line) is discarded when new bytes arrive, so the next client's request is not glued to it. */
#include "control.h"
#include "arch.h"
#include "click.h"
#include "json.h"
#include "nicmac.h"
#include "qoe.h"
#include "serial.h"
#include "time.h"
#include "version.h"
#include "virtio.h"

#define MAX_LINE 8192
#define MAX_FIELDS 32
#define BYTE_WAIT_US 2000   /* keep polling this long for the rest of a started line */
#define STALE_US 1000000    /* a partial line older than this is dropped when new input arrives */

static const struct vnf_info *info;
static char line[MAX_LINE + 1];
static size_t line_len;
static bool line_too_long;
static uint64_t line_last_tsc; /* when the last byte arrived */
static char scratch[MAX_LINE + 64];
static char reply[256 * 1024];
/* click_configure may keep pointers into its text: keep the running graph's text alive */
static char cfg_text[2][MAX_LINE + 1];
static int cfg_cur;

uint64_t uptime_us(void) { return tsc_to_ns(rdtsc() - info->tsc_base) / 1000; }

void ctl_init(const struct vnf_info *i) { info = i; }

void ctl_send_line(const char *s, size_t n)
{
	if (info->virtio) {
		con_send_line(s, n);
		return;
	}
	serial_write(COM2, s, n);
	serial_write(COM2, "\n", 1);
}

static void send_jw(struct jw *w)
{
	if (w->overflow) {
		static const char msg[] = "{\"ok\":false,\"error\":{\"code\":\"internal\",\"message\":\"reply too large\"}}";
		ctl_send_line(msg, sizeof msg - 1);
		return;
	}
	ctl_send_line(w->buf, w->len);
}

static void mac_str(char *b, const uint8_t *m)
{
	ksnprintf(b, 18, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5]);
}

void ctl_send_ready(const uint8_t (*macs)[6], int nics, uint32_t slots, const char *clock)
{
	struct jw w;
	char m[18];
	jw_init(&w, reply, sizeof reply);
	jw_obj_begin(&w);
	jw_kstr(&w, "ev", "ready");
	jw_ku64(&w, "proto", 1);
	jw_kstr(&w, "name", info->name);
	jw_kstr(&w, "version", VERSION);
	jw_ku64(&w, "boot_us", info->boot_us);
	jw_kstr(&w, "clock", clock);
	jw_kstr(&w, "ctl", info->virtio ? "virtio" : "com2");
	jw_ku64(&w, "nics", (uint64_t)nics);
	jw_key(&w, "macs");
	jw_arr_begin(&w);
	for (int i = 0; i < nics; i++) {
		mac_str(m, macs[i]);
		jw_str(&w, m);
	}
	jw_arr_end(&w);
	jw_ku64(&w, "slots", slots);
	jw_obj_end(&w);
	send_jw(&w);
}

void ctl_send_error_event(const char *message)
{
	struct jw w;
	jw_init(&w, reply, sizeof reply);
	jw_obj_begin(&w);
	jw_kstr(&w, "ev", "error");
	jw_kstr(&w, "message", message);
	jw_obj_end(&w);
	send_jw(&w);
}

/* {"id":N,"ok":false,"error":{"code":C,"message":M}}; id < 0: no id */
static void reply_error(int64_t id, const char *code, const char *message)
{
	struct jw w;
	jw_init(&w, reply, sizeof reply);
	jw_obj_begin(&w);
	if (id >= 0)
		jw_ku64(&w, "id", (uint64_t)id);
	jw_kbool(&w, "ok", false);
	jw_key(&w, "error");
	jw_obj_begin(&w);
	jw_kstr(&w, "code", code);
	jw_kstr(&w, "message", message);
	jw_obj_end(&w);
	jw_obj_end(&w);
	send_jw(&w);
}

static void reply_begin(struct jw *w, int64_t id)
{
	jw_init(w, reply, sizeof reply);
	jw_obj_begin(w);
	jw_ku64(w, "id", (uint64_t)id);
	jw_kbool(w, "ok", true);
	jw_key(w, "result");
	jw_obj_begin(w);
}

static void reply_end(struct jw *w)
{
	jw_obj_end(w);
	jw_obj_end(w);
	send_jw(w);
}

static void op_ping(int64_t id)
{
	struct jw w;
	reply_begin(&w, id);
	jw_kbool(&w, "pong", true);
	jw_ku64(&w, "uptime_us", uptime_us());
	jw_kbool(&w, "configured", click_configured());
	jw_ku64(&w, "boot_us", info->boot_us);
	reply_end(&w);
}

static void op_stats(int64_t id)
{
	struct jw w;
	reply_begin(&w, id);
	jw_ku64(&w, "uptime_us", uptime_us());
	jw_kbool(&w, "configured", click_configured());
	jw_key(&w, "cpu");
	jw_obj_begin(&w);
	jw_ku64(&w, "busy_us", tsc_to_ns(cpu_use.busy) / 1000);
	jw_ku64(&w, "poll_us", tsc_to_ns(cpu_use.poll) / 1000);
	jw_ku64(&w, "halt_us", tsc_to_ns(cpu_use.halt) / 1000);
	jw_ku64(&w, "stolen_us", tsc_to_ns(cpu_use.steal) / 1000);
	jw_ku64(&w, "halts", cpu_use.halts);
	jw_ku64(&w, "kicks", net_kicks());
	jw_ku64(&w, "wake_rx", cpu_use.wake_rx);
	jw_ku64(&w, "wake_timer", cpu_use.wake_timer);
	jw_ku64(&w, "wake_other", cpu_use.wake_other);
	jw_ku64(&w, "rx_no_irq", cpu_use.rx_no_irq);
	jw_ku64(&w, "naps", cpu_use.naps);
	jw_ku64(&w, "naps_empty", cpu_use.naps_empty);
	if (clock_has_steal()) {
		jw_ku64(&w, "steal_us", cpu_use.steal_ns / 1000);
		jw_ku64(&w, "steal_max_us", cpu_use.steal_max_ns / 1000);
		jw_ku64(&w, "stalls", cpu_use.stalls);
		jw_ku64(&w, "backoffs", cpu_use.backoffs);
		jw_kbool(&w, "poll_paused", net_busy_poll_paused());
	}
	jw_obj_end(&w);
	click_stats_json(&w);
	reply_end(&w);
}

/* {"id":N,"ok":false,"error":{"code":"config",("field":F | "line":L,"col":C),"message":M}} */
static void reply_config_error(int64_t id, const char *field, int line_no, int col, const char *message)
{
	struct jw w;
	jw_init(&w, reply, sizeof reply);
	jw_obj_begin(&w);
	jw_ku64(&w, "id", (uint64_t)id);
	jw_kbool(&w, "ok", false);
	jw_key(&w, "error");
	jw_obj_begin(&w);
	jw_kstr(&w, "code", "config");
	if (field) {
		jw_kstr(&w, "field", field);
	} else {
		jw_key(&w, "line");
		jw_i64(&w, line_no);
		jw_key(&w, "col");
		jw_i64(&w, col);
	}
	jw_kstr(&w, "message", message);
	jw_obj_end(&w);
	jw_obj_end(&w);
	send_jw(&w);
}

static void op_configure(int64_t id, const struct jfield *f, int n)
{
	const struct jfield *cfg = json_get(f, n, "config");
	const struct jfield *sl = json_get(f, n, "slots");
	uint32_t slots = 0;
	if (!cfg || cfg->type != JT_STRING) {
		reply_error(id, "bad_request", "missing or invalid 'config' (must be a string)");
		return;
	}
	if (sl && sl->type != JT_NULL) {
		if (sl->type != JT_NUMBER || !sl->is_int || sl->num < 1 || sl->num > CLICK_MAX_SLOTS) {
			reply_error(id, "bad_request", "invalid 'slots' (must be an integer 1..65536)");
			return;
		}
		slots = (uint32_t)sl->num;
	}
	/* macs: checked before the graph, applied only after it was accepted (all or nothing) */
	struct macs_req mr;
	char mfield[16], mmsg[160], mscratch[256];
	int mrc = macs_from_json(json_get(f, n, "macs"), info->nics, &mr, mfield, sizeof mfield, mmsg,
				 sizeof mmsg, mscratch, sizeof mscratch);
	if (mrc == MACS_BAD_REQUEST) {
		reply_error(id, "bad_request", mmsg);
		return;
	}
	if (mrc == MACS_CONFIG) {
		reply_config_error(id, mfield, 0, 0, mmsg);
		kprintf_later("configure: rejected: %s\n", mmsg);
		return;
	}
	size_t len = cfg->str_len > MAX_LINE ? MAX_LINE : cfg->str_len;
	int nxt = cfg_cur ^ 1;
	memcpy(cfg_text[nxt], cfg->str, len);
	cfg_text[nxt][len] = 0;

	struct click_err err;
	memset(&err, 0, sizeof err);
	uint64_t t0 = rdtsc();
	int rc = click_configure(cfg_text[nxt], len, slots, &err);
	uint64_t us = tsc_to_ns(rdtsc() - t0) / 1000;
	struct jw w;
	/* the COM1 log line is queued (kprintf_later): each UART byte is a VM exit, ~1 ms per line
	 * under PVM, which neither this client nor the next request should wait for */
	if (rc == 0) {
		cfg_cur = nxt;
		for (int i = 0; i < mr.n; i++)
			if (mr.set[i]) {
				click_set_mac(i, mr.mac[i]);
				if (boot_log_full)
					kprintf_later("configure: nic %d mac %02x:%02x:%02x:%02x:%02x:%02x\n", i, mr.mac[i][0],
					      mr.mac[i][1], mr.mac[i][2], mr.mac[i][3], mr.mac[i][4], mr.mac[i][5]);
			}
		reply_begin(&w, id);
		jw_kbool(&w, "forwarding", click_configured());
		jw_ku64(&w, "elements", click_element_count());
		jw_ku64(&w, "config_us", us);
		reply_end(&w);
		kprintf_later("configure: ok, %u elements, slots %u, %lu us\n", click_element_count(),
			click_slots_total(), us);
		return;
	}
	err.message[sizeof err.message - 1] = 0;
	reply_config_error(id, NULL, err.line, err.col, err.message);
	kprintf_later("configure: error at line %d col %d: %s\n", err.line, err.col, err.message);
}

/* {"op":"qoe","capacity":N,"budget_ns":B,"quantile_ppm":Q[,"wait_ppm":W]}: session slots at the
 * service's QoE (PROTOCOL.md §4 qoe; include/qoe.h). capacity 0 turns it off (free = the flow
 * table's); wait_ppm (optional, 0 = off) is the host-wait budget. */
static void op_qoe(int64_t id, const struct jfield *f, int n)
{
	const struct jfield *cap = json_get(f, n, "capacity");
	const struct jfield *bud = json_get(f, n, "budget_ns");
	const struct jfield *qp = json_get(f, n, "quantile_ppm");
	if (!cap || cap->type != JT_NUMBER || !cap->is_int || cap->num < 0 || cap->num > CLICK_MAX_SLOTS) {
		reply_error(id, "bad_request", "missing or invalid 'capacity' (must be an integer 0..65536; 0 = off)");
		return;
	}
	if (cap->num > 0 && (!bud || bud->type != JT_NUMBER || !bud->is_int || bud->num < 1 ||
			     bud->num > 60000000000ll)) {
		reply_error(id, "bad_request", "missing or invalid 'budget_ns' (must be an integer 1..60000000000)");
		return;
	}
	if (cap->num > 0 && (!qp || qp->type != JT_NUMBER || !qp->is_int || qp->num < 1 || qp->num > 999999)) {
		reply_error(id, "bad_request", "missing or invalid 'quantile_ppm' (must be an integer 1..999999, e.g. 990000 for p99)");
		return;
	}
	const struct jfield *wt = json_get(f, n, "wait_ppm");
	if (cap->num > 0 && wt && (wt->type != JT_NUMBER || !wt->is_int || wt->num < 0 || wt->num > 1000000)) {
		reply_error(id, "bad_request", "invalid 'wait_ppm' (must be an integer 0..1000000: the share of a window the vCPU may wait for the host, ppm; 0 = off)");
		return;
	}
	if (cap->num > 0)
		click_qoe_set((uint32_t)cap->num, (uint64_t)bud->num, (uint32_t)qp->num,
			      wt ? (uint32_t)wt->num : 0);
	else
		click_qoe_set(0, 0, 0, 0);
	uint32_t total = click_slots_total(), used = click_slots_used();
	struct jw w;
	reply_begin(&w, id);
	jw_ku64(&w, "total", total);
	jw_ku64(&w, "used", used);
	jw_ku64(&w, "free", qoe_free(&click_qoe, total - used, used));
	if (cap->num > 0)
		click_qoe_json(&w);
	reply_end(&w);
}

/* {"op":"poll"[,"window_us":N][,"host_halt_poll":B][,"coalesce_us":N]}: the busy-poll window
 * after the last frame, the host's halt polling and interrupt moderation (PROTOCOL.md §4 poll);
 * without them it only reports them. */
#define POLL_WINDOW_MAX_US 100000
#define POLL_COALESCE_MAX_US 10000
static void op_poll(int64_t id, const struct jfield *f, int n)
{
	const struct jfield *w_us = json_get(f, n, "window_us");
	if (w_us && (w_us->type != JT_NUMBER || !w_us->is_int || w_us->num < 0 ||
		     w_us->num > POLL_WINDOW_MAX_US)) {
		reply_error(id, "bad_request", "invalid 'window_us' (must be an integer 0..100000)");
		return;
	}
	const struct jfield *hpf = json_get(f, n, "host_halt_poll");
	if (hpf && hpf->type != JT_BOOL) {
		reply_error(id, "bad_request", "invalid 'host_halt_poll' (must be true or false)");
		return;
	}
	const struct jfield *c_us = json_get(f, n, "coalesce_us");
	if (c_us && (c_us->type != JT_NUMBER || !c_us->is_int || c_us->num < 0 ||
		     c_us->num > POLL_COALESCE_MAX_US)) {
		reply_error(id, "bad_request", "invalid 'coalesce_us' (must be an integer 0..10000)");
		return;
	}
	if (c_us && c_us->num > 0 && !info->deadline_timer) {
		reply_error(id, "bad_request", "'coalesce_us' needs the TSC-deadline timer (this "
			    "VNF has none)");
		return;
	}
	if (c_us)
		net_set_coalesce_us((uint32_t)c_us->num);
	if (w_us) {
		net_set_busy_poll_us((uint32_t)w_us->num);
		/* window 0: no polling at all, the host's after a halt neither */
		clock_host_halt_poll(w_us->num > 0);
	}
	if (hpf)
		clock_host_halt_poll(hpf->boolean ? 1 : 0);
	int hp = clock_host_halt_poll(-1);
	struct jw w;
	reply_begin(&w, id);
	jw_ku64(&w, "window_us", net_busy_poll_us());
	jw_ku64(&w, "coalesce_us", net_coalesce_us());
	if (hp >= 0)
		jw_kbool(&w, "host_halt_poll", hp != 0);
	reply_end(&w);
}

static void handle_line(const char *s, size_t n)
{
	static struct jfield f[MAX_FIELDS];
	const char *emsg = "syntax error";
	int nf = json_parse_object(s, n, f, MAX_FIELDS, scratch, sizeof scratch, &emsg);
	if (nf < 0) {
		reply_error(-1, "parse", emsg ? emsg : "not a JSON object");
		return;
	}
	const struct jfield *id = json_get(f, nf, "id");
	if (!id || id->type != JT_NUMBER || !id->is_int || id->num < 0 || id->num > 0x7fffffff) {
		reply_error(-1, "bad_request", "missing or invalid 'id' (must be an integer 0..2147483647)");
		return;
	}
	const struct jfield *op = json_get(f, nf, "op");
	if (!op || op->type != JT_STRING) {
		reply_error(id->num, "bad_request", "missing or invalid 'op' (must be a string)");
		return;
	}
	if (!strcmp(op->str, "ping"))
		op_ping(id->num);
	else if (!strcmp(op->str, "stats"))
		op_stats(id->num);
	else if (!strcmp(op->str, "configure"))
		op_configure(id->num, f, nf);
	else if (!strcmp(op->str, "qoe"))
		op_qoe(id->num, f, nf);
	else if (!strcmp(op->str, "poll"))
		op_poll(id->num, f, nf);
	else {
		char msg[96];
		ksnprintf(msg, sizeof msg, "unknown op '%s'", op->str);
		reply_error(id->num, "unknown_op", msg);
	}
}

/* Returns true when a complete line was consumed (handled or rejected). */
static bool feed(int c)
{
	if (c != '\n') {
		if (line_len < MAX_LINE)
			line[line_len++] = (char)c;
		else
			line_too_long = true;
		return false;
	}
	if (line_too_long) {
		reply_error(-1, "too_long", "line longer than 8192 bytes");
	} else {
		size_t n = line_len;
		while (n && (line[n - 1] == '\r' || line[n - 1] == ' ' || line[n - 1] == '\t'))
			n--;
		if (n) {
			line[n] = 0;
			handle_line(line, n);
		}
	}
	line_len = 0;
	line_too_long = false;
	return true;
}

/* New input arrived: drop a partial line that has been waiting for more than STALE_US. */
static void check_stale(void)
{
	uint64_t now = rdtsc();
	if ((line_len || line_too_long) && now - line_last_tsc > ns_to_tsc(STALE_US * 1000ull)) {
		kprintf_later("control: dropped a stale partial line (%lu bytes)\n", (uint64_t)line_len);
		line_len = 0;
		line_too_long = false;
	}
	line_last_tsc = now;
}

static bool feed_chunk(const char *data, size_t n)
{
	bool handled = false;
	check_stale();
	for (size_t i = 0; i < n; i++)
		handled |= feed(data[i]);
	return handled;
}

bool ctl_poll(void)
{
	if (info->virtio)
		return con_rx(feed_chunk);
	char buf[64];
	size_t n = serial_read(COM2, buf, sizeof buf);
	if (!n)
		return false;
	check_stale();
	bool handled = false;
	uint64_t wait = ns_to_tsc(BYTE_WAIT_US * 1000ull), last = rdtsc();
	for (;;) {
		for (size_t i = 0; i < n; i++)
			handled |= feed(buf[i]);
		if (n) {
			last = rdtsc();
			line_last_tsc = last;
		} else if (line_len == 0 && !line_too_long)
			break; /* nothing pending */
		else if (info->rx_irq || rdtsc() - last > wait)
			break; /* partial line: the rest raises the IRQ (or the next tick polls) */
		/* don't starve the data path during a long line */
		net_poll();
		click_run_tasks();
		net_flush_tx();
		n = serial_read(COM2, buf, sizeof buf);
	}
	return handled;
}
