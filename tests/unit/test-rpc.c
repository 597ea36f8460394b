// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test-rpc.c - the control protocol's transport: every request and
 * response type round-trips through a frame; the server (on a private
 * loop, fed through socketpairs) answers whole frames sent at once, byte
 * by byte or pipelined, closes truncated frames without dispatching,
 * refuses zero and oversized lengths as soon as the header is in (before
 * any body byte), answers garbage and foreign versions with an error and
 * closes, drops a peer that stalls inside a frame, caps connections and
 * flushes responses larger than the socket buffer; the access policy;
 * the blocking client's timeouts and length cap; a real socket from
 * za_rpc_listen() used by a forked client, and (as root) forked
 * unprivileged clients: refused by their credentials, or served as
 * members of the server's group (primary or supplementary).
 */
#include <check.h>

#include "tap.h"
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ev.h>

#include "io.h"
#include "log.h"
#include "rpc.h"

/* ---- messages of every type ---- */

static char *paths3[] = { "/dev/a", "/dev/b", "/var/tmp/d2.img" };

/* Fill @r with request type @i (0..NR_REQ-1); storage is static. */
#define NR_REQ 16
static void make_request(int i, Zarray__Request *r)
{
	static Zarray__Ping ping;
	static Zarray__Create create;
	static Zarray__Assemble assemble;
	static Zarray__Stop stop;
	static Zarray__Destroy destroy;
	static Zarray__List list;
	static Zarray__Status status;
	static Zarray__Add add;
	static Zarray__Remove rm;
	static Zarray__Fail fail;
	static Zarray__Replace replace;
	static Zarray__Rebuild rebuild;
	static Zarray__Scrub scrub;
	static Zarray__Watch watch;
	static Zarray__Export exp;
	static Zarray__Shutdown shutdown;

	zarray__request__init(r);
	r->version = ZA_RPC_VERSION;
	r->id = 1000 + (uint64_t)i;
	switch (i) {
	case 0:
		zarray__ping__init(&ping);
		r->body_case = ZARRAY__REQUEST__BODY_PING;
		r->ping = &ping;
		break;
	case 1:
		zarray__create__init(&create);
		create.name = "tank";
		create.k = 8;
		create.p = 2;
		create.has_chunk_bytes = true;
		create.chunk_bytes = 65536;
		create.has_size_bytes = true;
		create.size_bytes = 1ull << 40;
		create.n_paths = 3;
		create.paths = paths3;
		create.has_force = true;
		create.force = true;
		r->body_case = ZARRAY__REQUEST__BODY_CREATE;
		r->create = &create;
		break;
	case 2:
		zarray__assemble__init(&assemble);
		assemble.name = "tank";
		assemble.n_paths = 2;
		assemble.paths = paths3;
		r->body_case = ZARRAY__REQUEST__BODY_ASSEMBLE;
		r->assemble = &assemble;
		break;
	case 3:
		zarray__stop__init(&stop);
		stop.name = "tank";
		r->body_case = ZARRAY__REQUEST__BODY_STOP;
		r->stop = &stop;
		break;
	case 4:
		zarray__destroy__init(&destroy);
		destroy.name = "tank";
		destroy.has_force = true;
		destroy.force = true;
		r->body_case = ZARRAY__REQUEST__BODY_DESTROY;
		r->destroy = &destroy;
		break;
	case 5:
		zarray__list__init(&list);
		r->body_case = ZARRAY__REQUEST__BODY_LIST;
		r->list = &list;
		break;
	case 6:
		zarray__status__init(&status);
		status.name = "tank";
		r->body_case = ZARRAY__REQUEST__BODY_STATUS;
		r->status = &status;
		break;
	case 7:
		zarray__add__init(&add);
		add.name = "tank";
		add.n_paths = 1;
		add.paths = paths3 + 2;
		r->body_case = ZARRAY__REQUEST__BODY_ADD;
		r->add = &add;
		break;
	case 8:
		zarray__remove__init(&rm);
		rm.name = "tank";
		rm.n_paths = 3;
		rm.paths = paths3;
		r->body_case = ZARRAY__REQUEST__BODY_REMOVE;
		r->remove = &rm;
		break;
	case 9:
		zarray__fail__init(&fail);
		fail.name = "tank";
		fail.path = "/dev/a";
		r->body_case = ZARRAY__REQUEST__BODY_FAIL;
		r->fail = &fail;
		break;
	case 10:
		zarray__replace__init(&replace);
		replace.name = "tank";
		replace.old_path = "/dev/a";
		replace.new_path = "/dev/z";
		r->body_case = ZARRAY__REQUEST__BODY_REPLACE;
		r->replace = &replace;
		break;
	case 11:
		zarray__rebuild__init(&rebuild);
		rebuild.name = "tank";
		rebuild.action = ZARRAY__REBUILD_ACTION__REBUILD_RESUME;
		rebuild.has_rate_bps = true;
		rebuild.rate_bps = 200000000;
		r->body_case = ZARRAY__REQUEST__BODY_REBUILD;
		r->rebuild = &rebuild;
		break;
	case 12:
		zarray__scrub__init(&scrub);
		scrub.name = "tank";
		scrub.action = ZARRAY__SCRUB_ACTION__SCRUB_STOP;
		r->body_case = ZARRAY__REQUEST__BODY_SCRUB;
		r->scrub = &scrub;
		break;
	case 13:
		zarray__watch__init(&watch);
		watch.name = "tank";
		r->body_case = ZARRAY__REQUEST__BODY_WATCH;
		r->watch = &watch;
		break;
	case 14:
		zarray__export__init(&exp);
		exp.name = "tank";
		r->body_case = ZARRAY__REQUEST__BODY_EXPORT;
		r->export = &exp;
		break;
	default:
		zarray__shutdown__init(&shutdown);
		r->body_case = ZARRAY__REQUEST__BODY_SHUTDOWN;
		r->shutdown = &shutdown;
		break;
	}
}

/* An ArrayList of one array with @n members and two jobs (malloc'ed). */
static Zarray__ArrayList *make_arrays(unsigned n)
{
	Zarray__ArrayList *l = calloc(1, sizeof(*l));
	Zarray__ArrayStatus *a = calloc(1, sizeof(*a));
	Zarray__JobStatus *j = calloc(2, sizeof(*j));
	unsigned i;

	zarray__array_list__init(l);
	zarray__array_status__init(a);
	a->name = "tank";
	a->uuid = "0b5c7e8e-0000-4000-8000-00000000beef";
	a->state = ZARRAY__ARRAY_STATE__ARRAY_DEGRADED;
	a->data = 8;
	a->parity = 2;
	a->chunk_bytes = 65536;
	a->size_bytes = 3ull << 40;
	a->used_bytes = 5ull << 30;
	a->has_generation = true;
	a->generation = 42;
	a->export_uri = "nbd+unix:///tank?socket=/run/zarray/tank.nbd";
	a->n_members = n;
	a->members = calloc(n ? n : 1, sizeof(*a->members));
	for (i = 0; i < n; i++) {
		Zarray__MemberStatus *m = calloc(1, sizeof(*m));

		zarray__member_status__init(m);
		m->path = "/dev/disk/by-id/ata-ST20000NM007D-3DJ103_ZVT0XXXX";
		m->uuid = "11111111-2222-4333-8444-555555555555";
		m->index = i;
		m->state = i == 3 ? ZARRAY__MEMBER_STATE__MEMBER_FAILED :
				    ZARRAY__MEMBER_STATE__MEMBER_ONLINE;
		m->size_bytes = 20ull << 40;
		m->used_bytes = (uint64_t)i << 30;
		m->err_read = i;
		m->err_write = 2 * i;
		m->err_checksum = 3 * i;
		m->has_repaired_bytes = true;
		m->repaired_bytes = 4096ull * i;
		a->members[i] = m;
	}
	zarray__job_status__init(&j[0]);
	j[0].kind = ZARRAY__JOB_KIND__JOB_REBUILD;
	j[0].state = ZARRAY__JOB_STATE__JOB_RUNNING;
	j[0].done_bytes = 1ull << 30;
	j[0].total_bytes = 3ull << 30;
	j[0].has_rate_bps = true;
	j[0].rate_bps = 310ull << 20;
	j[0].has_eta_s = true;
	j[0].eta_s = 5;
	zarray__job_status__init(&j[1]);
	j[1].kind = ZARRAY__JOB_KIND__JOB_GC;
	j[1].state = ZARRAY__JOB_STATE__JOB_PAUSED;
	a->n_jobs = 2;
	a->jobs = calloc(2, sizeof(*a->jobs));
	a->jobs[0] = &j[0];
	a->jobs[1] = &j[1];
	l->n_arrays = 1;
	l->arrays = calloc(1, sizeof(*l->arrays));
	l->arrays[0] = a;
	return l;
}

static void free_arrays(Zarray__ArrayList *l)
{
	Zarray__ArrayStatus *a = l->arrays[0];
	size_t i;

	for (i = 0; i < a->n_members; i++)
		free(a->members[i]);
	free(a->members);
	free(a->jobs[0]);
	free(a->jobs);
	free(a);
	free(l->arrays);
	free(l);
}

#define NR_RESP 8
/* Response type @i; *@arr is set when an ArrayList was allocated. */
static void make_response(int i, Zarray__Response *r, Zarray__ArrayList **arr)
{
	static Zarray__Pong pong;
	static Zarray__Created created;
	static Zarray__Done done;
	static Zarray__Jobs jobs;
	static Zarray__Event event;
	static Zarray__Exported exported;
	static Zarray__Error err;

	*arr = NULL;
	zarray__response__init(r);
	r->version = ZA_RPC_VERSION;
	r->id = 2000 + (uint64_t)i;
	switch (i) {
	case 0:
		zarray__pong__init(&pong);
		pong.daemon_version = "0.1.0";
		pong.has_protocol_version = true;
		pong.protocol_version = 1;
		r->body_case = ZARRAY__RESPONSE__BODY_PONG;
		r->pong = &pong;
		break;
	case 1:
		zarray__created__init(&created);
		created.name = "tank";
		created.uuid = "0b5c7e8e-0000-4000-8000-00000000beef";
		created.export_uri = "nbd+unix:///tank?socket=/x";
		r->body_case = ZARRAY__RESPONSE__BODY_CREATED;
		r->created = &created;
		break;
	case 2:
		zarray__done__init(&done);
		done.message = "stopped";
		r->body_case = ZARRAY__RESPONSE__BODY_DONE;
		r->done = &done;
		break;
	case 3:
		*arr = make_arrays(10);
		r->body_case = ZARRAY__RESPONSE__BODY_ARRAYS;
		r->arrays = *arr;
		break;
	case 4:
		*arr = make_arrays(0);
		zarray__jobs__init(&jobs);
		jobs.name = "tank";
		jobs.n_jobs = (*arr)->arrays[0]->n_jobs;
		jobs.jobs = (*arr)->arrays[0]->jobs;
		r->body_case = ZARRAY__RESPONSE__BODY_JOBS;
		r->jobs = &jobs;
		break;
	case 5:
		*arr = make_arrays(0);
		zarray__event__init(&event);
		event.name = "tank";
		event.state = ZARRAY__ARRAY_STATE__ARRAY_DEGRADED;
		event.n_jobs = (*arr)->arrays[0]->n_jobs;
		event.jobs = (*arr)->arrays[0]->jobs;
		r->has_more = true;
		r->more = true;
		r->body_case = ZARRAY__RESPONSE__BODY_EVENT;
		r->event = &event;
		break;
	case 6:
		zarray__exported__init(&exported);
		exported.uri = "nbd+unix:///tank?socket=/run/zarray/tank.nbd";
		r->body_case = ZARRAY__RESPONSE__BODY_EXPORTED;
		r->exported = &exported;
		break;
	default:
		zarray__error__init(&err);
		err.code = ZARRAY__ERROR_CODE__ERR_NOT_FOUND;
		err.message = "no array named 'tank' is running";
		err.has_errno_value = true;
		err.errno_value = ENOENT;
		r->error = &err;
		break;
	}
}

static uint32_t hdr_len(const uint8_t *b)
{
	return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 |
	       (uint32_t)b[2] << 8 | b[3];
}

START_TEST(test_request_roundtrip)
{
	Zarray__Request r, *d = NULL;
	uint8_t *buf, *buf2;
	size_t len, len2;

	make_request(_i, &r);
	ck_assert_int_eq(za_rpc_encode_request(&r, &buf, &len), 0);
	ck_assert_uint_eq(hdr_len(buf), len - ZA_RPC_HDR_BYTES);
	ck_assert_int_eq(za_rpc_decode_request(buf + 4, len - 4, &d), 0);
	ck_assert_int_eq(d->body_case, r.body_case);
	ck_assert_uint_eq(d->id, r.id);
	ck_assert_uint_eq(d->version, ZA_RPC_VERSION);
	/* Every field survived: the decoded message encodes to the same
	 * bytes. */
	ck_assert_int_eq(za_rpc_encode_request(d, &buf2, &len2), 0);
	ck_assert_uint_eq(len2, len);
	ck_assert_mem_eq(buf2, buf, len);
	if (d->body_case == ZARRAY__REQUEST__BODY_CREATE) {
		ck_assert_str_eq(d->create->name, "tank");
		ck_assert_uint_eq(d->create->n_paths, 3);
		ck_assert_str_eq(d->create->paths[2], "/var/tmp/d2.img");
		ck_assert_uint_eq(d->create->size_bytes, 1ull << 40);
		ck_assert(d->create->force);
	}
	if (d->body_case == ZARRAY__REQUEST__BODY_REBUILD) {
		ck_assert_int_eq(d->rebuild->action,
				 ZARRAY__REBUILD_ACTION__REBUILD_RESUME);
		ck_assert_uint_eq(d->rebuild->rate_bps, 200000000);
	}
	free(buf);
	free(buf2);
	za_rpc_request_free(d);
}
END_TEST

START_TEST(test_response_roundtrip)
{
	Zarray__Response r, *d = NULL;
	Zarray__ArrayList *arr;
	uint8_t *buf, *buf2;
	size_t len, len2;

	make_response(_i, &r, &arr);
	ck_assert_int_eq(za_rpc_encode_response(&r, &buf, &len), 0);
	ck_assert_uint_eq(hdr_len(buf), len - ZA_RPC_HDR_BYTES);
	ck_assert_int_eq(za_rpc_decode_response(buf + 4, len - 4, &d), 0);
	ck_assert_int_eq(d->body_case, r.body_case);
	ck_assert_uint_eq(d->id, r.id);
	ck_assert_int_eq(!!d->error, !!r.error);
	ck_assert_int_eq(za_rpc_encode_response(d, &buf2, &len2), 0);
	ck_assert_uint_eq(len2, len);
	ck_assert_mem_eq(buf2, buf, len);
	if (d->body_case == ZARRAY__RESPONSE__BODY_ARRAYS) {
		const Zarray__ArrayStatus *a = d->arrays->arrays[0];

		ck_assert_uint_eq(a->n_members, 10);
		ck_assert_uint_eq(a->members[9]->err_checksum, 27);
		ck_assert_int_eq(a->members[3]->state,
				 ZARRAY__MEMBER_STATE__MEMBER_FAILED);
		ck_assert_uint_eq(a->jobs[0]->eta_s, 5);
		ck_assert_str_eq(a->export_uri,
				 "nbd+unix:///tank?socket=/run/zarray/"
				 "tank.nbd");
	}
	if (d->body_case == ZARRAY__RESPONSE__BODY_EVENT)
		ck_assert(d->has_more && d->more);
	if (d->error) {
		ck_assert_int_eq(d->error->code,
				 ZARRAY__ERROR_CODE__ERR_NOT_FOUND);
		ck_assert_int_eq(d->error->errno_value, ENOENT);
	}
	free(buf);
	free(buf2);
	za_rpc_response_free(d);
	if (arr)
		free_arrays(arr);
}
END_TEST

START_TEST(test_frame_len)
{
	static const struct {
		uint32_t v;
		int ret;
	} t[] = {
		{ 0, -EMSGSIZE },
		{ 1, 0 },
		{ ZA_RPC_MAX_FRAME_BYTES, 0 },
		{ ZA_RPC_MAX_FRAME_BYTES + 1, -EMSGSIZE },
		{ 0x7fffffff, -EMSGSIZE },
		{ 0xffffffff, -EMSGSIZE },
	};
	Zarray__Request r;
	Zarray__Fail fail;
	uint8_t *buf;
	size_t i, len;
	char *big;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		uint8_t h[4] = { (uint8_t)(t[i].v >> 24),
				 (uint8_t)(t[i].v >> 16),
				 (uint8_t)(t[i].v >> 8), (uint8_t)t[i].v };
		uint32_t out = 0;

		ck_assert_int_eq(za_rpc_frame_len(h, &out), t[i].ret);
		if (!t[i].ret)
			ck_assert_uint_eq(out, t[i].v);
	}
	/* The encoder refuses what the peer would refuse. */
	big = malloc(ZA_RPC_MAX_FRAME_BYTES + 1);
	memset(big, 'x', ZA_RPC_MAX_FRAME_BYTES);
	big[ZA_RPC_MAX_FRAME_BYTES] = '\0';
	make_request(9, &r);
	zarray__fail__init(&fail);
	fail.name = "tank";
	fail.path = big;
	r.fail = &fail;
	ck_assert_int_eq(za_rpc_encode_request(&r, &buf, &len), -EMSGSIZE);
	free(big);
	/* And a message missing a required field is never sent. */
	fail.path = NULL;
	ck_assert_int_eq(za_rpc_encode_request(&r, &buf, &len), -EINVAL);
	ck_assert_int_eq(za_rpc_decode_request((const uint8_t *)"", 0, NULL),
			 -EBADMSG);
}
END_TEST

START_TEST(test_errno_code)
{
	ck_assert_int_eq(za_rpc_errno_code(-ENOENT),
			 ZARRAY__ERROR_CODE__ERR_NOT_FOUND);
	ck_assert_int_eq(za_rpc_errno_code(-EINVAL),
			 ZARRAY__ERROR_CODE__ERR_INVALID);
	ck_assert_int_eq(za_rpc_errno_code(-EBUSY),
			 ZARRAY__ERROR_CODE__ERR_BUSY);
	ck_assert_int_eq(za_rpc_errno_code(-EEXIST),
			 ZARRAY__ERROR_CODE__ERR_EXISTS);
	ck_assert_int_eq(za_rpc_errno_code(-EMEDIUMTYPE),
			 ZARRAY__ERROR_CODE__ERR_INVALID);
	ck_assert_int_eq(za_rpc_errno_code(-EIO), ZARRAY__ERROR_CODE__ERR_IO);
	ck_assert_int_eq(za_rpc_errno_code(-EACCES),
			 ZARRAY__ERROR_CODE__ERR_PERMISSION);
	ck_assert_int_eq(za_rpc_errno_code(-ENOMEM),
			 ZARRAY__ERROR_CODE__ERR_INTERNAL);
	ck_assert_int_eq(za_rpc_errno_code(0), ZARRAY__ERROR_CODE__ERR_NONE);
}
END_TEST

START_TEST(test_peer_policy)
{
	const gid_t sup[] = { 10, 20, 777 };
	struct za_rpc_peer root = { 1, 0, 0 }, me = { 2, 1234, 1234 },
			   user = { 3, 1000, 1000 }, grp = { 4, 1001, 777 };

	ck_assert(za_rpc_peer_allowed(&root, NULL, 0, false, 0, 1234));
	ck_assert(za_rpc_peer_allowed(&me, NULL, 0, false, 0, 1234));
	/* No zarray group: nobody else. */
	ck_assert(!za_rpc_peer_allowed(&user, sup, 3, false, 777, 1234));
	ck_assert(!za_rpc_peer_allowed(&grp, NULL, 0, false, 777, 1234));
	/* The group, as primary or supplementary. */
	ck_assert(za_rpc_peer_allowed(&grp, NULL, 0, true, 777, 1234));
	ck_assert(za_rpc_peer_allowed(&user, sup, 3, true, 777, 1234));
	ck_assert(!za_rpc_peer_allowed(&user, sup, 2, true, 777, 1234));
	ck_assert(!za_rpc_peer_allowed(&user, NULL, 0, true, 777, 1234));
}
END_TEST

START_TEST(test_group_gid)
{
	gid_t g = 1;

	ck_assert_int_eq(za_rpc_group_gid("root", &g), 0);
	ck_assert_uint_eq(g, 0);
	ck_assert_int_eq(za_rpc_group_gid("no-such-group-zarray-test", &g),
			 -ENOENT);
}
END_TEST

/* ---- a server on a private loop ---- */

static struct {
	int calls;
	Zarray__Request__BodyCase last;
	unsigned members; /* status: members in the reply */
	unsigned events; /* watch: events before the final one */
} T;

static void t_request(struct za_rpc_conn *c, Zarray__Request *req, void *priv)
{
	Zarray__Response r;
	Zarray__Pong pong;
	Zarray__Event ev;
	Zarray__ArrayList *arr;
	unsigned i;

	(void)priv;
	T.calls++;
	T.last = req->body_case;
	zarray__response__init(&r);
	r.id = req->id;
	switch (req->body_case) {
	case ZARRAY__REQUEST__BODY_PING:
		zarray__pong__init(&pong);
		pong.daemon_version = "test";
		r.body_case = ZARRAY__RESPONSE__BODY_PONG;
		r.pong = &pong;
		za_rpc_reply(c, &r);
		break;
	case ZARRAY__REQUEST__BODY_STATUS:
		arr = make_arrays(T.members);
		r.body_case = ZARRAY__RESPONSE__BODY_ARRAYS;
		r.arrays = arr;
		za_rpc_reply(c, &r);
		free_arrays(arr);
		break;
	case ZARRAY__REQUEST__BODY_WATCH:
		zarray__event__init(&ev);
		ev.name = "tank";
		ev.state = ZARRAY__ARRAY_STATE__ARRAY_HEALTHY;
		r.body_case = ZARRAY__RESPONSE__BODY_EVENT;
		r.event = &ev;
		r.has_more = true;
		for (i = 0; i <= T.events; i++) {
			r.more = i < T.events;
			za_rpc_reply(c, &r);
		}
		break;
	default:
		za_rpc_reply_error(c, req->id, ZARRAY__ERROR_CODE__ERR_INVALID,
				   EOPNOTSUPP, "not in this test");
		break;
	}
	za_rpc_request_free(req);
}

static const struct za_rpc_server_ops t_ops = { .request = t_request };

struct srv {
	struct za_io *io;
	struct za_rpc_server *s;
};

static void srv_new(struct srv *v, unsigned max_conns, double timeout_s)
{
	struct za_rpc_server_params p = { .max_conns = max_conns,
					  .timeout_s = timeout_s };

	memset(&T, 0, sizeof(T));
	ck_assert_int_eq(za_io_new(NULL, &v->io), 0);
	ck_assert_int_eq(za_rpc_server_new(v->io, -1, &p, &t_ops, NULL, &v->s),
			 0);
}

static void srv_free(struct srv *v)
{
	za_rpc_server_free(v->s);
	za_io_free(v->io);
}

/* A connected pair: the server adopts one end, we keep the other. */
static int srv_connect(struct srv *v)
{
	int sv[2];

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv),
			 0);
	/* Refusals (too many connections) are what some tests look for. */
	za_rpc_server_adopt(v->s, sv[0]);
	return sv[1];
}

static void pump(struct srv *v)
{
	ev_run(za_io_loop(v->io), EVRUN_NOWAIT);
}

/* Run the loop until the server has @n connections, up to @ms. */
static bool pump_conns(struct srv *v, unsigned n, int ms)
{
	uint64_t end = za_io_now_ns() + (uint64_t)ms * 1000000ull;

	while (za_rpc_server_nr_conns(v->s) != n) {
		if (za_io_now_ns() > end)
			return false;
		pump(v);
		usleep(200);
	}
	return true;
}

static void send_all(int fd, const void *buf, size_t len)
{
	ck_assert_int_eq(send(fd, buf, len, MSG_NOSIGNAL), (ssize_t)len);
}

static void send_req(int fd, Zarray__Request *r)
{
	uint8_t *buf;
	size_t len;

	ck_assert_int_eq(za_rpc_encode_request(r, &buf, &len), 0);
	send_all(fd, buf, len);
	free(buf);
}

/*
 * Receive one response while running the server's loop. Returns 0,
 * -ECONNRESET on EOF, -ETIMEDOUT.
 */
static int recv_pumped(struct srv *v, int fd, Zarray__Response **out, int ms)
{
	uint64_t end = za_io_now_ns() + (uint64_t)ms * 1000000ull;
	uint8_t hdr[4], *body = NULL;
	size_t have = 0;
	uint32_t len = 0;
	int ret;

	while (za_io_now_ns() < end) {
		uint8_t *dst = have < 4 ? hdr + have : body + (have - 4);
		size_t want = have < 4 ? 4 - have : len - (have - 4);
		ssize_t n;

		pump(v);
		n = recv(fd, dst, want, MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno == ECONNRESET)) {
			free(body);
			return -ECONNRESET;
		}
		if (n < 0) {
			usleep(200);
			continue;
		}
		have += (size_t)n;
		if (have == 4) {
			ck_assert_int_eq(za_rpc_frame_len(hdr, &len), 0);
			body = malloc(len);
		}
		if (have > 4 && have == 4 + len) {
			ret = za_rpc_decode_response(body, len, out);
			free(body);
			return ret;
		}
	}
	free(body);
	return -ETIMEDOUT;
}

/* The server closed @fd's peer: EOF within @ms (pending data drained). */
static bool closed_within(struct srv *v, int fd, int ms)
{
	uint64_t end = za_io_now_ns() + (uint64_t)ms * 1000000ull;
	uint8_t b[4096];

	while (za_io_now_ns() < end) {
		ssize_t n;

		pump(v);
		n = recv(fd, b, sizeof(b), MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno == ECONNRESET))
			return true;
		if (n < 0)
			usleep(200);
	}
	return false;
}

static void expect_error(struct srv *v, int fd, Zarray__ErrorCode code,
			 uint64_t id)
{
	Zarray__Response *r = NULL;

	ck_assert_int_eq(recv_pumped(v, fd, &r, 2000), 0);
	ck_assert_ptr_nonnull(r->error);
	ck_assert_int_eq(r->error->code, code);
	ck_assert_uint_eq(r->id, id);
	ck_assert(strlen(r->error->message) > 0);
	za_rpc_response_free(r);
}

START_TEST(test_server_ping)
{
	Zarray__Response *resp = NULL;
	Zarray__Request r;
	struct srv v;
	int fd;

	srv_new(&v, 0, 0);
	fd = srv_connect(&v);
	make_request(0, &r);
	send_req(fd, &r);
	ck_assert_int_eq(recv_pumped(&v, fd, &resp, 2000), 0);
	ck_assert_int_eq(resp->body_case, ZARRAY__RESPONSE__BODY_PONG);
	ck_assert_uint_eq(resp->id, r.id);
	ck_assert_uint_eq(resp->version, ZA_RPC_VERSION);
	ck_assert_ptr_null(resp->error);
	za_rpc_response_free(resp);
	/* The connection stays open for the next request. */
	ck_assert_uint_eq(za_rpc_server_nr_conns(v.s), 1);
	close(fd);
	ck_assert(pump_conns(&v, 0, 2000));
	ck_assert_int_eq(T.calls, 1);
	srv_free(&v);
}
END_TEST

/* Every request type reaches the handler intact through the socket. */
START_TEST(test_server_every_request)
{
	Zarray__Response *resp = NULL;
	Zarray__Request r;
	struct srv v;
	int fd;

	srv_new(&v, 0, 0);
	fd = srv_connect(&v);
	make_request(_i, &r);
	if (r.body_case == ZARRAY__REQUEST__BODY_WATCH)
		T.events = 3;
	send_req(fd, &r);
	ck_assert_int_eq(recv_pumped(&v, fd, &resp, 2000), 0);
	ck_assert_uint_eq(resp->id, r.id);
	ck_assert_int_eq(T.last, r.body_case);
	if (r.body_case == ZARRAY__REQUEST__BODY_WATCH) {
		int n = 1;

		while (resp->has_more && resp->more) {
			za_rpc_response_free(resp);
			ck_assert_int_eq(recv_pumped(&v, fd, &resp, 2000), 0);
			ck_assert_int_eq(resp->body_case,
					 ZARRAY__RESPONSE__BODY_EVENT);
			n++;
		}
		ck_assert_int_eq(n, 4);
	}
	za_rpc_response_free(resp);
	close(fd);
	srv_free(&v);
}
END_TEST

START_TEST(test_server_byte_by_byte)
{
	Zarray__Response *resp = NULL;
	Zarray__Request r;
	struct srv v;
	uint8_t *buf;
	size_t len, i;
	int fd;

	srv_new(&v, 0, 0);
	fd = srv_connect(&v);
	make_request(1, &r); /* create: the longest */
	ck_assert_int_eq(za_rpc_encode_request(&r, &buf, &len), 0);
	for (i = 0; i < len; i++) {
		send_all(fd, buf + i, 1);
		pump(&v);
		pump(&v);
		ck_assert_int_eq(T.calls, 0 + (i == len - 1));
	}
	ck_assert_int_eq(recv_pumped(&v, fd, &resp, 2000), 0);
	ck_assert_int_eq(T.calls, 1);
	ck_assert_int_eq(T.last, ZARRAY__REQUEST__BODY_CREATE);
	za_rpc_response_free(resp);
	free(buf);
	close(fd);
	srv_free(&v);
}
END_TEST

START_TEST(test_server_pipelined)
{
	Zarray__Response *resp = NULL;
	Zarray__Request r;
	uint8_t *all = NULL, *buf;
	size_t len, tot = 0;
	struct srv v;
	int fd, i;

	srv_new(&v, 0, 0);
	fd = srv_connect(&v);
	for (i = 0; i < 5; i++) {
		make_request(i == 2 ? 5 : 0, &r);
		r.id = 100 + (uint64_t)i;
		ck_assert_int_eq(za_rpc_encode_request(&r, &buf, &len), 0);
		all = realloc(all, tot + len);
		memcpy(all + tot, buf, len);
		tot += len;
		free(buf);
	}
	send_all(fd, all, tot);
	for (i = 0; i < 5; i++) {
		ck_assert_int_eq(recv_pumped(&v, fd, &resp, 2000), 0);
		ck_assert_uint_eq(resp->id, 100 + (uint64_t)i);
		za_rpc_response_free(resp);
	}
	ck_assert_int_eq(T.calls, 5);
	free(all);
	close(fd);
	srv_free(&v);
}
END_TEST

/* A frame cut at every length: closed, never dispatched. */
START_TEST(test_server_truncated)
{
	Zarray__Request r;
	struct srv v;
	uint8_t *buf;
	size_t len, cut;
	int fd;

	make_request(1, &r);
	ck_assert_int_eq(za_rpc_encode_request(&r, &buf, &len), 0);
	srv_new(&v, 0, 0);
	for (cut = 1; cut < len; cut++) {
		fd = srv_connect(&v);
		send_all(fd, buf, cut);
		shutdown(fd, SHUT_WR);
		ck_assert(pump_conns(&v, 0, 2000));
		ck_assert_int_eq(T.calls, 0);
		close(fd);
	}
	free(buf);
	srv_free(&v);
}
END_TEST

/* Zero and oversized lengths: answered right after the header. */
START_TEST(test_server_bad_length)
{
	static const uint32_t lens[] = { 0, ZA_RPC_MAX_FRAME_BYTES + 1,
					 0x7fffffff, 0xffffffff };
	uint32_t l = lens[_i];
	uint8_t h[4] = { (uint8_t)(l >> 24), (uint8_t)(l >> 16),
			 (uint8_t)(l >> 8), (uint8_t)l };
	struct srv v;
	int fd;

	srv_new(&v, 0, 0);
	fd = srv_connect(&v);
	send_all(fd, h, 4);
	/* No body byte was sent: the server did not wait for (or allocate)
	 * one before answering. */
	expect_error(&v, fd, ZARRAY__ERROR_CODE__ERR_MALFORMED, 0);
	ck_assert(closed_within(&v, fd, 2000));
	ck_assert(pump_conns(&v, 0, 2000));
	ck_assert_int_eq(T.calls, 0);
	close(fd);
	srv_free(&v);
}
END_TEST

/* Random bodies and bit-flipped requests: an answer, never a crash. */
START_TEST(test_server_garbage)
{
	Zarray__Response *resp = NULL;
	Zarray__Request r;
	unsigned seed = (unsigned)_i * 2654435761u + 1;
	uint8_t *buf;
	size_t len, i;
	struct srv v;
	int fd;

	srv_new(&v, 0, 0);
	fd = srv_connect(&v);
	if (_i % 2) {
		make_request(_i % NR_REQ, &r);
		ck_assert_int_eq(za_rpc_encode_request(&r, &buf, &len), 0);
		for (i = 0; i < (size_t)(1 + _i % 5); i++) {
			size_t at = 4 + (size_t)rand_r(&seed) % (len - 4);

			buf[at] ^= (uint8_t)(1u << (rand_r(&seed) % 8));
		}
	} else {
		len = 4 + 1 + (size_t)rand_r(&seed) % 600;
		buf = malloc(len);
		for (i = 4; i < len; i++)
			buf[i] = (uint8_t)rand_r(&seed);
		buf[0] = 0;
		buf[1] = 0;
		buf[2] = (uint8_t)((len - 4) >> 8);
		buf[3] = (uint8_t)(len - 4);
	}
	send_all(fd, buf, len);
	/* Whatever it decoded to, there is exactly one answer. */
	ck_assert_int_eq(recv_pumped(&v, fd, &resp, 2000), 0);
	if (resp->error &&
	    (resp->error->code == ZARRAY__ERROR_CODE__ERR_MALFORMED ||
	     resp->error->code == ZARRAY__ERROR_CODE__ERR_VERSION)) {
		ck_assert_int_eq(T.calls, 0);
		ck_assert(closed_within(&v, fd, 2000));
	} else {
		ck_assert_int_eq(T.calls, 1);
	}
	za_rpc_response_free(resp);
	free(buf);
	close(fd);
	srv_free(&v);
}
END_TEST

START_TEST(test_server_version)
{
	static const uint32_t versions[] = { 0, 2, 0xffffffff };
	Zarray__Request r;
	struct srv v;
	int fd;

	srv_new(&v, 0, 0);
	fd = srv_connect(&v);
	make_request(0, &r);
	r.version = versions[_i];
	r.id = 77;
	send_req(fd, &r);
	expect_error(&v, fd, ZARRAY__ERROR_CODE__ERR_VERSION, 77);
	ck_assert(closed_within(&v, fd, 2000));
	ck_assert_int_eq(T.calls, 0);
	close(fd);
	srv_free(&v);
}
END_TEST

START_TEST(test_server_stall)
{
	Zarray__Request r;
	struct srv v;
	uint8_t *buf;
	size_t len;
	int fd, idle;

	srv_new(&v, 0, 0.2);
	fd = srv_connect(&v);
	idle = srv_connect(&v);
	make_request(1, &r);
	ck_assert_int_eq(za_rpc_encode_request(&r, &buf, &len), 0);
	send_all(fd, buf, len / 2);
	ck_assert_uint_eq(za_rpc_server_nr_conns(v.s), 2);
	/* Both the half frame and the silent peer are dropped. */
	ck_assert(pump_conns(&v, 0, 2000));
	ck_assert(closed_within(&v, fd, 100));
	ck_assert(closed_within(&v, idle, 100));
	ck_assert_int_eq(T.calls, 0);
	free(buf);
	close(fd);
	close(idle);
	srv_free(&v);
}
END_TEST

START_TEST(test_server_conn_cap)
{
	Zarray__Response *resp = NULL;
	Zarray__Request r;
	struct srv v;
	int a, b, c;

	srv_new(&v, 2, 0);
	a = srv_connect(&v);
	b = srv_connect(&v);
	c = srv_connect(&v);
	expect_error(&v, c, ZARRAY__ERROR_CODE__ERR_BUSY, 0);
	ck_assert(closed_within(&v, c, 2000));
	ck_assert_uint_eq(za_rpc_server_nr_conns(v.s), 2);
	make_request(0, &r);
	send_req(b, &r);
	ck_assert_int_eq(recv_pumped(&v, b, &resp, 2000), 0);
	ck_assert_ptr_null(resp->error);
	za_rpc_response_free(resp);
	/* A slot freed is a slot usable. */
	close(a);
	ck_assert(pump_conns(&v, 1, 2000));
	close(c);
	c = srv_connect(&v);
	send_req(c, &r);
	ck_assert_int_eq(recv_pumped(&v, c, &resp, 2000), 0);
	ck_assert_ptr_null(resp->error);
	za_rpc_response_free(resp);
	close(b);
	close(c);
	srv_free(&v);
}
END_TEST

/* A response far larger than the socket buffer goes out in pieces. */
START_TEST(test_server_big_response)
{
	Zarray__Response *resp = NULL;
	Zarray__Request r;
	struct srv v;
	int fd, sv[2], sz = 4096;

	srv_new(&v, 0, 0);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	/* A small send buffer on the server's end: partial writes. */
	setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
	ck_assert_int_eq(za_rpc_server_adopt(v.s, sv[0]), 0);
	fd = sv[1];
	T.members = 1024;
	make_request(6, &r);
	send_req(fd, &r);
	ck_assert_int_eq(recv_pumped(&v, fd, &resp, 5000), 0);
	ck_assert_int_eq(resp->body_case, ZARRAY__RESPONSE__BODY_ARRAYS);
	ck_assert_uint_eq(resp->arrays->arrays[0]->n_members, 1024);
	ck_assert_uint_eq(resp->arrays->arrays[0]->members[1023]->index, 1023);
	za_rpc_response_free(resp);
	close(fd);
	srv_free(&v);
}
END_TEST

/* ---- the blocking client ---- */

START_TEST(test_client_limits)
{
	Zarray__Response *resp = NULL;
	uint8_t h[4] = { 0xff, 0xff, 0xff, 0xff };
	uint64_t t0;
	int sv[2], fd;

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	t0 = za_io_now_ns();
	ck_assert_int_eq(za_rpc_recv_response(sv[0], 100, &resp), -ETIMEDOUT);
	ck_assert(za_io_now_ns() - t0 >= 90000000ull);
	send_all(sv[1], h, 4);
	ck_assert_int_eq(za_rpc_recv_response(sv[0], 1000, &resp), -EMSGSIZE);
	close(sv[1]);
	ck_assert_int_eq(za_rpc_recv_response(sv[0], 1000, &resp), -ECONNRESET);
	close(sv[0]);
	ck_assert_int_eq(za_rpc_connect("/nonexistent/zarrayd.sock", 100, &fd),
			 -ENOENT);
}
END_TEST

static char tmpdir[64];

static void rm_tmpdir(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	ck_assert_int_eq(system(cmd), 0);
}

/*
 * Fork a client that connects to @path, sends a ping and exits with 0
 * (pong), 10 + error code (an error response) or 99 (transport error);
 * run the loop until it is done. @uid: drop to it first (-1: stay), with
 * primary group @gid and supplementary group @sup (-1: none).
 */
static int forked_ping_as(struct srv *v, const char *path, int uid, int gid,
			  int sup)
{
	int status = -1;
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		Zarray__Response *resp;
		Zarray__Request r;
		gid_t g = (gid_t)sup;
		int fd;

		if (uid >= 0 &&
		    (setgroups(sup >= 0, &g) < 0 || setgid((gid_t)gid) < 0 ||
		     setuid((uid_t)uid) < 0))
			_exit(98);
		if (za_rpc_connect(path, 2000, &fd) < 0)
			_exit(97);
		make_request(0, &r);
		za_rpc_send_request(fd, &r, 2000);
		if (za_rpc_recv_response(fd, 2000, &resp) < 0)
			_exit(99);
		_exit(resp->error ? 10 + resp->error->code : 0);
	}
	for (;;) {
		pid_t w = waitpid(pid, &status, WNOHANG);

		if (w == pid)
			break;
		pump(v);
		usleep(500);
	}
	ck_assert(WIFEXITED(status));
	return WEXITSTATUS(status);
}

static int forked_ping(struct srv *v, const char *path, int uid)
{
	return forked_ping_as(v, path, uid, uid, -1);
}

START_TEST(test_listen_socket)
{
	struct za_rpc_server_params p = { 0 };
	char path[128];
	struct stat st;
	struct srv v;
	gid_t grp;
	int lfd, fd;

	snprintf(tmpdir, sizeof(tmpdir), "/tmp/za-rpc.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
	snprintf(path, sizeof(path), "%s/s.sock", tmpdir);
	/* A regular file in the way is not replaced. */
	fd = open(path, O_CREAT | O_WRONLY, 0600);
	close(fd);
	ck_assert_int_eq(za_rpc_listen(path, 0660, (gid_t)-1, &lfd), -EEXIST);
	unlink(path);
	/* A stale socket (nobody listening) is. */
	ck_assert_int_eq(za_rpc_listen(path, 0660, (gid_t)-1, &lfd), 0);
	close(lfd);
	ck_assert_int_eq(za_rpc_connect(path, 100, &fd), -ECONNREFUSED);
	ck_assert_int_eq(za_rpc_listen(path, 0660, (gid_t)-1, &lfd), 0);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert(S_ISSOCK(st.st_mode));
	ck_assert_uint_eq(st.st_mode & 0777, 0660);

	memset(&T, 0, sizeof(T));
	ck_assert_int_eq(za_io_new(NULL, &v.io), 0);
	ck_assert_int_eq(za_rpc_server_new(v.io, lfd, &p, &t_ops, NULL, &v.s),
			 0);
	ck_assert_int_eq(forked_ping(&v, path, -1), 0);
	ck_assert_int_eq(T.calls, 1);
	if (geteuid() == 0) {
		/* Let nobody reach the socket, so that only the credential
		 * check stands in the way. */
		ck_assert_int_eq(chmod(tmpdir, 0755), 0);
		ck_assert_int_eq(chmod(path, 0666), 0);
		ck_assert_int_eq(forked_ping(&v, path, 65534),
				 10 + ZARRAY__ERROR_CODE__ERR_PERMISSION);
		ck_assert_int_eq(T.calls, 1);
		/* And the server still serves root. */
		ck_assert_int_eq(forked_ping(&v, path, -1), 0);
		ck_assert_int_eq(T.calls, 2);
	}
	srv_free(&v);

	/* A server whose group is one that uid 65534 can hold: members are
	 * served, as primary or as supplementary group; others are not. */
	if (geteuid() == 0 && za_rpc_group_gid("nogroup", &grp) == 0) {
		p.group = "nogroup";
		ck_assert_int_eq(za_rpc_listen(path, 0666, (gid_t)-1, &lfd), 0);
		memset(&T, 0, sizeof(T));
		ck_assert_int_eq(za_io_new(NULL, &v.io), 0);
		ck_assert_int_eq(za_rpc_server_new(v.io, lfd, &p, &t_ops, NULL,
						   &v.s),
				 0);
		ck_assert_int_eq(forked_ping_as(&v, path, 65534, (int)grp, -1),
				 0);
		ck_assert_int_eq(
			forked_ping_as(&v, path, 65534, 4321, (int)grp), 0);
		ck_assert_int_eq(forked_ping_as(&v, path, 65534, 4321, 4322),
				 10 + ZARRAY__ERROR_CODE__ERR_PERMISSION);
		ck_assert_int_eq(T.calls, 2);
		srv_free(&v);
	}
	rm_tmpdir();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("rpc");
	TCase *tc = tcase_create("codec");
	TCase *ts = tcase_create("server");
	TCase *tl = tcase_create("client");

	signal(SIGPIPE, SIG_IGN);
	/* The server logs every refusal; tests provoke many. */
	za_log_set_level(ZA_LOG_ERR);
	tcase_add_loop_test(tc, test_request_roundtrip, 0, NR_REQ);
	tcase_add_loop_test(tc, test_response_roundtrip, 0, NR_RESP);
	tcase_add_test(tc, test_frame_len);
	tcase_add_test(tc, test_errno_code);
	tcase_add_test(tc, test_peer_policy);
	tcase_add_test(tc, test_group_gid);
	suite_add_tcase(s, tc);

	tcase_set_timeout(ts, 20);
	tcase_add_test(ts, test_server_ping);
	tcase_add_loop_test(ts, test_server_every_request, 0, NR_REQ);
	tcase_add_test(ts, test_server_byte_by_byte);
	tcase_add_test(ts, test_server_pipelined);
	tcase_add_test(ts, test_server_truncated);
	tcase_add_loop_test(ts, test_server_bad_length, 0, 4);
	tcase_add_loop_test(ts, test_server_garbage, 0, 64);
	tcase_add_loop_test(ts, test_server_version, 0, 3);
	tcase_add_test(ts, test_server_stall);
	tcase_add_test(ts, test_server_conn_cap);
	tcase_add_test(ts, test_server_big_response);
	suite_add_tcase(s, ts);

	tcase_set_timeout(tl, 20);
	tcase_add_test(tl, test_client_limits);
	tcase_add_test(tl, test_listen_socket);
	suite_add_tcase(s, tl);
	return trun(s);
}
