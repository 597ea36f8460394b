// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * cmd-status.c - the query commands: `zarray list`, `zarray status
 * [NAME] [--json] [--test]`, `zarray watch NAME`, and the printing they
 * share with the other commands (states, job progress lines, JSON).
 *
 * Text is for people: IEC sizes, an mdadm/zpool-like layout, a progress
 * bar redrawn in place on a terminal only. JSON is for programs: raw
 * numbers in bytes, the field names zarray(8) documents, one document
 * per command (one per line for watch). Nothing here changes an array.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "client.h"

/* How long a watch waits for the next event (the daemon sends one per
 * second while a job runs). */
#define WATCH_EVENT_MS 30000
#define BAR_WIDTH 30

const char *za_cli_array_state_str(int state)
{
	switch (state) {
	case ZARRAY__ARRAY_STATE__ARRAY_HEALTHY:
		return "healthy";
	case ZARRAY__ARRAY_STATE__ARRAY_DEGRADED:
		return "degraded";
	case ZARRAY__ARRAY_STATE__ARRAY_FAILED:
		return "failed";
	case ZARRAY__ARRAY_STATE__ARRAY_ASSEMBLING:
		return "assembling";
	default:
		return "unknown";
	}
}

const char *za_cli_member_state_str(int state)
{
	switch (state) {
	case ZARRAY__MEMBER_STATE__MEMBER_ONLINE:
		return "online";
	case ZARRAY__MEMBER_STATE__MEMBER_FAILED:
		return "failed";
	case ZARRAY__MEMBER_STATE__MEMBER_MISSING:
		return "missing";
	case ZARRAY__MEMBER_STATE__MEMBER_DRAINING:
		return "draining";
	case ZARRAY__MEMBER_STATE__MEMBER_REMOVED:
		return "removed";
	default:
		return "unknown";
	}
}

const char *za_cli_job_kind_str(int kind)
{
	switch (kind) {
	case ZARRAY__JOB_KIND__JOB_REBUILD:
		return "rebuild";
	case ZARRAY__JOB_KIND__JOB_DRAIN:
		return "drain";
	case ZARRAY__JOB_KIND__JOB_SCRUB:
		return "scrub";
	case ZARRAY__JOB_KIND__JOB_GC:
		return "gc";
	default:
		return "unknown";
	}
}

const char *za_cli_job_state_str(int state)
{
	switch (state) {
	case ZARRAY__JOB_STATE__JOB_RUNNING:
		return "running";
	case ZARRAY__JOB_STATE__JOB_PAUSED:
		return "paused";
	case ZARRAY__JOB_STATE__JOB_DONE:
		return "done";
	default:
		return "unknown";
	}
}

/* Done, but not everything: columns left behind, or stopped by an error. */
static bool job_short(const Zarray__JobStatus *j)
{
	return j->state == ZARRAY__JOB_STATE__JOB_DONE &&
	       ((j->has_columns_left && j->columns_left) || j->error);
}

static double job_pct(const Zarray__JobStatus *j)
{
	double pct;

	/* A run that did all it found shows 100% even if the total it
	 * estimated shrank on the way; one that left work shows how far
	 * it got. */
	if (j->state == ZARRAY__JOB_STATE__JOB_DONE && !job_short(j))
		return 100.0;
	if (!j->total_bytes)
		return 0.0;
	pct = (double)j->done_bytes * 100.0 / (double)j->total_bytes;
	return pct > 100.0 ? 100.0 : pct;
}

const char *za_cli_job_line(const Zarray__JobStatus *j, bool bar, char *buf,
			    size_t len)
{
	char done[32], total[32], rate[32], b[BAR_WIDTH + 3];
	double pct = job_pct(j);
	size_t off;
	int i, fill = (int)(pct * BAR_WIDTH / 100.0);

	off = (size_t)snprintf(buf, len, "%s %s ", za_cli_job_kind_str(j->kind),
			       za_cli_job_state_str(j->state));
	if (bar) {
		b[0] = '[';
		for (i = 0; i < BAR_WIDTH; i++)
			b[1 + i] = i < fill ? '=' : i == fill ? '>' : ' ';
		if (fill >= BAR_WIDTH)
			b[BAR_WIDTH] = '=';
		b[BAR_WIDTH + 1] = ']';
		b[BAR_WIDTH + 2] = '\0';
		off += (size_t)snprintf(buf + off, off < len ? len - off : 0,
					"%s ", b);
	}
	off += (size_t)snprintf(
		buf + off, off < len ? len - off : 0, "%.1f%% %s/%s", pct,
		za_fmt_size(j->done_bytes, done, sizeof(done)),
		za_fmt_size(j->total_bytes, total, sizeof(total)));
	if (j->has_rate_bps && j->rate_bps &&
	    j->state == ZARRAY__JOB_STATE__JOB_RUNNING)
		off += (size_t)snprintf(
			buf + off, off < len ? len - off : 0, " %s/s",
			za_fmt_size(j->rate_bps, rate, sizeof(rate)));
	/* No ETA while it is not known (rate too low, or paused). */
	if (j->has_eta_s && j->eta_s &&
	    j->state == ZARRAY__JOB_STATE__JOB_RUNNING)
		off += (size_t)snprintf(buf + off, off < len ? len - off : 0,
					" ETA %llu:%02u:%02u",
					(unsigned long long)(j->eta_s / 3600),
					(unsigned)(j->eta_s / 60 % 60),
					(unsigned)(j->eta_s % 60));
	/* The limit in force (changeable while it runs; kept for later
	 * runs), while it has work to hold back. */
	if (j->has_rate_limit_bps && j->rate_limit_bps &&
	    j->state != ZARRAY__JOB_STATE__JOB_DONE)
		off += (size_t)snprintf(
			buf + off, off < len ? len - off : 0, " (limit %s/s)",
			za_fmt_size(j->rate_limit_bps, rate, sizeof(rate)));
	/* A scrub that went on from an earlier run (or a restart). */
	if (j->has_start_position && j->start_position &&
	    j->state != ZARRAY__JOB_STATE__JOB_DONE)
		off += (size_t)snprintf(buf + off, off < len ? len - off : 0,
					" (resumed after segment %llu)",
					(unsigned long long)j->start_position);
	if (j->state == ZARRAY__JOB_STATE__JOB_DONE && j->error)
		off += (size_t)snprintf(buf + off, off < len ? len - off : 0,
					", stopped: %s", j->error);
	if (j->state == ZARRAY__JOB_STATE__JOB_DONE && j->has_columns_left &&
	    j->columns_left)
		snprintf(buf + off, off < len ? len - off : 0,
			 ", %llu column%s not restored",
			 (unsigned long long)j->columns_left,
			 j->columns_left == 1 ? "" : "s");
	return buf;
}

void za_cli_json_job(FILE *f, const Zarray__JobStatus *j)
{
	fprintf(f,
		"{\"kind\":\"%s\",\"state\":\"%s\",\"done_bytes\":%llu,"
		"\"total_bytes\":%llu,\"rate_bps\":%llu,\"eta_s\":%llu",
		za_cli_job_kind_str(j->kind), za_cli_job_state_str(j->state),
		(unsigned long long)j->done_bytes,
		(unsigned long long)j->total_bytes,
		(unsigned long long)(j->has_rate_bps ? j->rate_bps : 0),
		(unsigned long long)(j->has_eta_s ? j->eta_s : 0));
	fprintf(f, ",\"rate_limit_bps\":%llu",
		(unsigned long long)(j->has_rate_limit_bps ? j->rate_limit_bps :
							     0));
	/* Scrub: where the pass got to, and where this run started. */
	if (j->has_position)
		fprintf(f, ",\"position\":%llu",
			(unsigned long long)j->position);
	if (j->has_start_position)
		fprintf(f, ",\"start_position\":%llu",
			(unsigned long long)j->start_position);
	/* Done short: what was left, and why it stopped (null: it did not). */
	fprintf(f, ",\"columns_left\":%llu,\"error\":",
		(unsigned long long)(j->has_columns_left ? j->columns_left :
							   0));
	if (j->error)
		za_json_str(f, j->error);
	else
		fputs("null", f);
	fputc('}', f);
}

/* "uri": the Unix socket's (null: not exported); "tcp_uri": null if none;
 * "stats": the NBD server's counters (null: not exported). */
static void json_export(FILE *f, const Zarray__ArrayStatus *a)
{
	fprintf(f, "\"export\":{\"uri\":");
	if (a->export_uri)
		za_json_str(f, a->export_uri);
	else
		fprintf(f, "null");
	fprintf(f, ",\"tcp_uri\":");
	if (a->export_tcp_uri)
		za_json_str(f, a->export_tcp_uri);
	else
		fprintf(f, "null");
	fprintf(f, ",\"stats\":");
	if (a->export_stats) {
		const Zarray__ExportStatus *x = a->export_stats;

		fprintf(f,
			"{\"conns_open\":%llu,\"conns_accepted\":%llu,"
			"\"conns_refused\":%llu,\"handshakes\":%llu,"
			"\"handshake_timeouts\":%llu,"
			"\"protocol_errors\":%llu,\"error_replies\":%llu,"
			"\"read_bytes\":%llu,\"written_bytes\":%llu,"
			"\"trimmed_bytes\":%llu,\"zeroed_bytes\":%llu,"
			"\"inflight\":%llu}",
			(unsigned long long)x->conns_open,
			(unsigned long long)x->conns_accepted,
			(unsigned long long)x->conns_refused,
			(unsigned long long)x->handshakes,
			(unsigned long long)x->handshake_timeouts,
			(unsigned long long)x->protocol_errors,
			(unsigned long long)x->error_replies,
			(unsigned long long)x->read_bytes,
			(unsigned long long)x->written_bytes,
			(unsigned long long)x->trimmed_bytes,
			(unsigned long long)x->zeroed_bytes,
			(unsigned long long)x->inflight);
	} else {
		fprintf(f, "null");
	}
	fputc('}', f);
}

/* The volume's counters, or null while it is being assembled. */
static void json_volume(FILE *f, const Zarray__VolumeStatus *v)
{
	if (!v) {
		fputs("null", f);
		return;
	}
	fprintf(f,
		"{\"live_bytes\":%llu,\"read_bytes\":%llu,"
		"\"written_bytes\":%llu,\"flushes\":%llu,"
		"\"data_stripes\":%llu,\"padded_stripes\":%llu,"
		"\"journal_writes\":%llu,\"gc\":{\"active\":%s,\"runs\":%llu,"
		"\"idle_runs\":%llu,\"moved_bytes\":%llu,"
		"\"freed_groups\":%llu,\"writes_stalled\":%llu},"
		"\"map\":{\"extents\":%llu,\"bytes\":%llu,"
		"\"cache_bytes\":%llu,\"pages_read\":%llu,"
		"\"page_waits\":%llu,\"page_errors\":%llu},"
		"\"checkpoint\":{\"written\":%llu,\"failed\":%llu,"
		"\"seq\":%llu,\"table_segments\":%llu,"
		"\"table_mismatches\":%llu,\"quarantined_zones\":%llu,"
		"\"quarantine_breaks\":%llu,\"anchored\":%s,"
		"\"anchor_mismatches\":%llu,\"pages\":%llu,"
		"\"pages_written\":%llu,\"pages_cleaned\":%llu},"
		"\"recovered_stripes\":%llu,\"recovery\":{\"table\":%s,"
		"\"zones\":%llu,\"headers\":%llu,\"table_segments\":%llu,"
		"\"counts\":%llu,\"count_mismatches\":%llu}}",
		(unsigned long long)v->live_bytes,
		(unsigned long long)v->read_bytes,
		(unsigned long long)v->written_bytes,
		(unsigned long long)v->flushes,
		(unsigned long long)v->data_stripes,
		(unsigned long long)v->padded_stripes,
		(unsigned long long)v->journal_writes,
		v->has_gc_active && v->gc_active ? "true" : "false",
		(unsigned long long)v->gc_runs,
		(unsigned long long)v->gc_idle_runs,
		(unsigned long long)v->gc_moved_bytes,
		(unsigned long long)v->gc_freed_groups,
		(unsigned long long)v->writes_stalled,
		(unsigned long long)v->map_extents,
		(unsigned long long)v->map_bytes,
		(unsigned long long)(v->has_map_cache_bytes ?
					     v->map_cache_bytes :
					     0),
		(unsigned long long)(v->has_map_pages_read ? v->map_pages_read :
							     0),
		(unsigned long long)(v->has_map_page_waits ? v->map_page_waits :
							     0),
		(unsigned long long)(v->has_map_page_errors ?
					     v->map_page_errors :
					     0),
		(unsigned long long)v->checkpoints,
		(unsigned long long)v->checkpoint_failures,
		(unsigned long long)v->checkpoint_seq,
		(unsigned long long)(v->has_table_segments ? v->table_segments :
							     0),
		(unsigned long long)(v->has_table_mismatches ?
					     v->table_mismatches :
					     0),
		(unsigned long long)(v->has_quarantined_zones ?
					     v->quarantined_zones :
					     0),
		(unsigned long long)(v->has_quarantine_breaks ?
					     v->quarantine_breaks :
					     0),
		v->has_anchored && v->anchored ? "true" : "false",
		(unsigned long long)(v->has_anchor_mismatches ?
					     v->anchor_mismatches :
					     0),
		(unsigned long long)(v->has_checkpoint_pages ?
					     v->checkpoint_pages :
					     0),
		(unsigned long long)(v->has_checkpoint_pages_written ?
					     v->checkpoint_pages_written :
					     0),
		(unsigned long long)(v->has_checkpoint_pages_cleaned ?
					     v->checkpoint_pages_cleaned :
					     0),
		(unsigned long long)v->recovered_stripes,
		v->has_recovery_table && v->recovery_table ? "true" : "false",
		(unsigned long long)(v->has_recovery_zones ? v->recovery_zones :
							     0),
		(unsigned long long)(v->has_recovery_headers ?
					     v->recovery_headers :
					     0),
		(unsigned long long)(v->has_recovery_table_segments ?
					     v->recovery_table_segments :
					     0),
		(unsigned long long)(v->has_recovery_counts ?
					     v->recovery_counts :
					     0),
		(unsigned long long)(v->has_recovery_count_mismatches ?
					     v->recovery_count_mismatches :
					     0));
}

void za_cli_json_array(FILE *f, const Zarray__ArrayStatus *a)
{
	size_t i;

	fprintf(f, "{\"name\":");
	za_json_str(f, a->name);
	fprintf(f, ",\"uuid\":");
	za_json_str(f, a->uuid);
	fprintf(f,
		",\"state\":\"%s\",\"data\":%u,\"parity\":%u,"
		"\"chunk_bytes\":%u,\"size_bytes\":%llu,\"max_size_bytes\":%llu,"
		"\"used_bytes\":%llu,\"generation\":%llu,",
		za_cli_array_state_str(a->state), a->data, a->parity,
		a->chunk_bytes, (unsigned long long)a->size_bytes,
		(unsigned long long)(a->has_max_size_bytes ? a->max_size_bytes :
							     a->size_bytes),
		(unsigned long long)a->used_bytes,
		(unsigned long long)(a->has_generation ? a->generation : 0));
	json_export(f, a);
	/* Where an assembly is (state "assembling"), else null. */
	if (a->assembly) {
		fprintf(f, ",\"assembly\":{\"phase\":");
		za_json_str(f, a->assembly->phase);
		fprintf(f, ",\"done\":%llu,\"total\":%llu}",
			(unsigned long long)a->assembly->done,
			(unsigned long long)a->assembly->total);
	} else {
		fputs(",\"assembly\":null", f);
	}
	fprintf(f, ",\"members\":[");
	for (i = 0; i < a->n_members; i++) {
		const Zarray__MemberStatus *m = a->members[i];

		fprintf(f, "%s{\"path\":", i ? "," : "");
		za_json_str(f, m->path);
		fprintf(f, ",\"uuid\":");
		za_json_str(f, m->uuid);
		fprintf(f,
			",\"index\":%u,\"state\":\"%s\",\"size_bytes\":%llu,"
			"\"used_bytes\":%llu,\"errors\":{\"read\":%llu,"
			"\"write\":%llu,\"checksum\":%llu},"
			"\"repaired_bytes\":%llu",
			m->index, za_cli_member_state_str(m->state),
			(unsigned long long)m->size_bytes,
			(unsigned long long)m->used_bytes,
			(unsigned long long)m->err_read,
			(unsigned long long)m->err_write,
			(unsigned long long)m->err_checksum,
			(unsigned long long)(m->has_repaired_bytes ?
						     m->repaired_bytes :
						     0));
		fprintf(f, ",\"read_bytes\":%llu,\"written_bytes\":%llu",
			(unsigned long long)(m->has_read_bytes ? m->read_bytes :
								 0),
			(unsigned long long)(m->has_written_bytes ?
						     m->written_bytes :
						     0));
		/* zarray replace: the new member's index, null if none. */
		if (m->has_replaced_by)
			fprintf(f, ",\"replaced_by\":%u}", m->replaced_by);
		else
			fputs(",\"replaced_by\":null}", f);
	}
	fprintf(f, "],\"jobs\":[");
	for (i = 0; i < a->n_jobs; i++) {
		if (i)
			fputc(',', f);
		za_cli_json_job(f, a->jobs[i]);
	}
	fprintf(f, "],\"volume\":");
	json_volume(f, a->volume);
	fputc('}', f);
}

/* The path of member @idx, or "?" (a daemon's answer is not trusted). */
static const char *replacement_path(const Zarray__ArrayStatus *a, uint32_t idx)
{
	size_t i;

	for (i = 0; i < a->n_members; i++)
		if (a->members[i]->index == idx)
			return a->members[i]->path;
	return "?";
}

/*
 * The export's lines: connections now and since it started, and what was
 * refused or closed (an admin's first question when a client cannot
 * connect: the cap, a handshake timeout, or a protocol error).
 */
static void print_export_text(const Zarray__ExportStatus *x)
{
	if (!x)
		return;
	printf("          %llu connection%s open, %llu since start, %llu "
	       "error repl%s\n",
	       (unsigned long long)x->conns_open, x->conns_open == 1 ? "" : "s",
	       (unsigned long long)x->conns_accepted,
	       (unsigned long long)x->error_replies,
	       x->error_replies == 1 ? "y" : "ies");
	printf("          refused %llu over the cap, %llu handshake timeout%s, "
	       "%llu protocol error%s\n",
	       (unsigned long long)x->conns_refused,
	       (unsigned long long)x->handshake_timeouts,
	       x->handshake_timeouts == 1 ? "" : "s",
	       (unsigned long long)x->protocol_errors,
	       x->protocol_errors == 1 ? "" : "s");
}

/*
 * The volume's lines: what it holds, what users and garbage collection
 * did since zarrayd assembled it, and the device bytes that cost (write
 * amplification, rebuilds and scrubs included).
 */
static void print_volume_text(const Zarray__ArrayStatus *a)
{
	const Zarray__VolumeStatus *v = a->volume;
	char b1[32], b2[32], b3[32];
	uint64_t dev_w = 0;
	size_t i;

	if (!v) {
		printf("  volume  being assembled\n");
		return;
	}
	for (i = 0; i < a->n_members; i++)
		if (a->members[i]->has_written_bytes)
			dev_w += a->members[i]->written_bytes;
	printf("  volume  live %s, map %llu extent%s (%s in memory",
	       za_fmt_size(v->live_bytes, b1, sizeof(b1)),
	       (unsigned long long)v->map_extents,
	       v->map_extents == 1 ? "" : "s",
	       za_fmt_size(v->map_bytes, b2, sizeof(b2)));
	if (v->has_map_cache_bytes && v->map_cache_bytes)
		printf(", cache %s, %llu pages read back",
		       za_fmt_size(v->map_cache_bytes, b3, sizeof(b3)),
		       (unsigned long long)v->map_pages_read);
	if (v->has_map_page_errors && v->map_page_errors)
		printf(", %llu UNREADABLE",
		       (unsigned long long)v->map_page_errors);
	printf(")\n");
	printf("          since start: written %s, read %s, %llu flushes; "
	       "devices written %s",
	       za_fmt_size(v->written_bytes, b1, sizeof(b1)),
	       za_fmt_size(v->read_bytes, b2, sizeof(b2)),
	       (unsigned long long)v->flushes,
	       za_fmt_size(dev_w, b3, sizeof(b3)));
	if (v->written_bytes)
		printf(" (%.2f per byte)",
		       (double)dev_w / (double)v->written_bytes);
	printf("\n");
	printf("          gc %llu runs (%llu idle), moved %s, %llu writes "
	       "stalled%s\n",
	       (unsigned long long)v->gc_runs,
	       (unsigned long long)v->gc_idle_runs,
	       za_fmt_size(v->gc_moved_bytes, b1, sizeof(b1)),
	       (unsigned long long)v->writes_stalled,
	       v->has_gc_active && v->gc_active ? "; collecting now" : "");
	if (v->checkpoint_seq)
		printf("          checkpoint at sequence %llu",
		       (unsigned long long)v->checkpoint_seq);
	else
		printf("          no checkpoint yet");
	/* A checkpoint that could not be written leaves recovery longer. */
	if (v->checkpoint_failures)
		printf(", %llu failed since start",
		       (unsigned long long)v->checkpoint_failures);
	if (v->recovered_stripes)
		printf("; %llu stripes replayed at assembly",
		       (unsigned long long)v->recovered_stripes);
	printf("\n");
}

/* "scanning zones, 37% (1234 of 3333)"; the daemon's figures are not
 * trusted to be in range. */
static const char *assembly_str(const Zarray__AssemblyProgress *p, char *buf,
				size_t len)
{
	if (!p)
		snprintf(buf, len, "starting");
	else if (p->total && p->done <= p->total)
		snprintf(buf, len, "%s, %.0f%% (%llu of %llu)", p->phase,
			 (double)p->done * 100.0 / (double)p->total,
			 (unsigned long long)p->done,
			 (unsigned long long)p->total);
	else
		snprintf(buf, len, "%s", p->phase);
	return buf;
}

static void print_array_text(const Zarray__ArrayStatus *a)
{
	char b1[32], b2[32], b3[32], line[256];
	size_t i, w = 4;

	if (a->state == ZARRAY__ARRAY_STATE__ARRAY_ASSEMBLING) {
		printf("%s: assembling: %s\n", a->name,
		       assembly_str(a->assembly, line, sizeof(line)));
		return;
	}

	printf("%s: %s, %u+%u, chunk %s, %zu members\n", a->name,
	       za_cli_array_state_str(a->state), a->data, a->parity,
	       za_fmt_size(a->chunk_bytes, b1, sizeof(b1)), a->n_members);
	printf("  uuid    %s\n", a->uuid);
	printf("  size    %s, used %s (%.1f%%)\n",
	       za_fmt_size(a->size_bytes, b1, sizeof(b1)),
	       za_fmt_size(a->used_bytes, b2, sizeof(b2)),
	       a->size_bytes ?
		       (double)a->used_bytes * 100.0 / (double)a->size_bytes :
		       0.0);
	printf("  export  %s\n", a->export_uri ? a->export_uri : "none");
	if (a->export_tcp_uri)
		printf("          %s\n", a->export_tcp_uri);
	print_export_text(a->export_stats);
	print_volume_text(a);
	for (i = 0; i < a->n_members; i++)
		if (strlen(a->members[i]->path) > w)
			w = strlen(a->members[i]->path);
	printf("  %5s  %-*s  %-8s  %10s  %10s  %6s  %6s  %6s\n", "INDEX",
	       (int)w, "PATH", "STATE", "SIZE", "USED", "READ", "WRITE",
	       "CKSUM");
	for (i = 0; i < a->n_members; i++) {
		const Zarray__MemberStatus *m = a->members[i];

		printf("  %5u  %-*s  %-8s  %10s  %10s  %6llu  %6llu  %6llu\n",
		       m->index, (int)w, m->path,
		       za_cli_member_state_str(m->state),
		       za_fmt_size(m->size_bytes, b1, sizeof(b1)),
		       za_fmt_size(m->used_bytes, b3, sizeof(b3)),
		       (unsigned long long)m->err_read,
		       (unsigned long long)m->err_write,
		       (unsigned long long)m->err_checksum);
	}
	/* zarray replace: which member takes which one's place. */
	for (i = 0; i < a->n_members; i++) {
		const Zarray__MemberStatus *m = a->members[i];

		if (m->has_replaced_by)
			printf("  replace %u (%s) by %u (%s)\n", m->index,
			       m->path, m->replaced_by,
			       replacement_path(a, m->replaced_by));
	}
	if (!a->n_jobs) {
		printf("  jobs    none\n");
		return;
	}
	printf("  jobs\n");
	for (i = 0; i < a->n_jobs; i++)
		printf("    %s\n",
		       za_cli_job_line(a->jobs[i], true, line, sizeof(line)));
}

/* Worst state, as `status --test` reports it. */
static int test_code(const Zarray__ArrayList *l)
{
	int rc = ZA_EXIT_TEST_HEALTHY;
	size_t i;

	for (i = 0; i < l->n_arrays; i++) {
		int s = l->arrays[i]->state;

		if (s == ZARRAY__ARRAY_STATE__ARRAY_DEGRADED) {
			if (rc < ZA_EXIT_TEST_DEGRADED)
				rc = ZA_EXIT_TEST_DEGRADED;
		} else if (s == ZARRAY__ARRAY_STATE__ARRAY_ASSEMBLING) {
			/* Its state is not known yet. */
			rc = ZA_EXIT_TEST_NO_INFO;
		} else if (s != ZARRAY__ARRAY_STATE__ARRAY_HEALTHY) {
			if (rc < ZA_EXIT_TEST_UNUSABLE)
				rc = ZA_EXIT_TEST_UNUSABLE;
		}
	}
	return rc;
}

int za_cmd_status(struct za_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "test", no_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	Zarray__Request req = ZARRAY__REQUEST__INIT;
	Zarray__Status m = ZARRAY__STATUS__INIT;
	struct za_client cl = { 0 };
	Zarray__Response *r = NULL;
	const Zarray__ArrayList *l;
	bool json = cli->json, test = false;
	int c, rc;
	size_t i;

	optind = 0; /* re-initialise: main parsed with "+" */
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (c == 'j') {
			json = true;
		} else if (c == 't') {
			test = true;
		} else {
			rc = za_cli_opt_end("status", c);
			if (rc >= 0)
				return rc;
		}
	}
	if (argc - optind > 1) {
		za_usage_error("status", "at most one NAME expected");
		return ZA_EXIT_USAGE;
	}
	if (optind < argc)
		m.name = argv[optind];
	req.body_case = ZARRAY__REQUEST__BODY_STATUS;
	req.status = &m;
	/* With --test, anything but an answer is "no information": 4. */
	rc = test ? ZA_EXIT_TEST_NO_INFO : ZA_EXIT_FAIL;
	if (za_client_open(&cl, cli, "status") < 0)
		return rc;
	if (za_client_call(&cl, &req, ZA_CLIENT_QUERY_MS, &r) < 0)
		goto out;
	if (za_client_failed(&cl, r))
		goto out;
	if (r->body_case != ZARRAY__RESPONSE__BODY_ARRAYS) {
		fprintf(stderr, "zarray status: unexpected answer from "
				"zarrayd\n");
		goto out;
	}
	l = r->arrays;
	if (json) {
		if (m.name && l->n_arrays == 1) {
			za_cli_json_array(stdout, l->arrays[0]);
		} else {
			printf("{\"arrays\":[");
			for (i = 0; i < l->n_arrays; i++) {
				if (i)
					putchar(',');
				za_cli_json_array(stdout, l->arrays[i]);
			}
			printf("]}");
		}
		putchar('\n');
	} else {
		for (i = 0; i < l->n_arrays; i++) {
			if (i)
				putchar('\n');
			print_array_text(l->arrays[i]);
		}
		if (!l->n_arrays)
			fprintf(stderr, "zarray status: no array is running\n");
	}
	rc = test ? test_code(l) : ZA_EXIT_OK;
out:
	za_rpc_response_free(r);
	za_client_close(&cl);
	return rc;
}

int za_cmd_list(struct za_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	Zarray__Request req = ZARRAY__REQUEST__INIT;
	Zarray__List m = ZARRAY__LIST__INIT;
	Zarray__Response *r;
	const Zarray__ArrayList *l;
	bool json = cli->json;
	char b1[32], b2[32];
	size_t i, w = 4;
	int c, rc;

	optind = 0; /* re-initialise: main parsed with "+" */
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (c == 'j') {
			json = true;
		} else {
			rc = za_cli_opt_end("list", c);
			if (rc >= 0)
				return rc;
		}
	}
	if (optind < argc) {
		za_usage_error("list", "no argument expected");
		return ZA_EXIT_USAGE;
	}
	req.body_case = ZARRAY__REQUEST__BODY_LIST;
	req.list = &m;
	rc = za_client_run(cli, "list", &req, ZA_CLIENT_QUERY_MS, &r);
	if (rc)
		return rc;
	if (r->body_case != ZARRAY__RESPONSE__BODY_ARRAYS) {
		fprintf(stderr,
			"zarray list: unexpected answer from zarrayd\n");
		za_rpc_response_free(r);
		return ZA_EXIT_FAIL;
	}
	l = r->arrays;
	if (json) {
		printf("{\"arrays\":[");
		for (i = 0; i < l->n_arrays; i++) {
			const Zarray__ArrayStatus *a = l->arrays[i];

			printf("%s{\"name\":", i ? "," : "");
			za_json_str(stdout, a->name);
			printf(",\"uuid\":");
			za_json_str(stdout, a->uuid);
			printf(",\"state\":\"%s\",\"data\":%u,\"parity\":%u,"
			       "\"chunk_bytes\":%u,\"size_bytes\":%llu,"
			       "\"used_bytes\":%llu,\"nr_members\":%zu,"
			       "\"nr_jobs\":%zu,",
			       za_cli_array_state_str(a->state), a->data,
			       a->parity, a->chunk_bytes,
			       (unsigned long long)a->size_bytes,
			       (unsigned long long)a->used_bytes, a->n_members,
			       a->n_jobs);
			json_export(stdout, a);
			putchar('}');
		}
		printf("]}\n");
	} else if (!l->n_arrays) {
		fprintf(stderr, "zarray list: no array is running\n");
	} else {
		for (i = 0; i < l->n_arrays; i++)
			if (strlen(l->arrays[i]->name) > w)
				w = strlen(l->arrays[i]->name);
		printf("%-*s  %-8s  %-8s  %10s  %10s  %7s  %s\n", (int)w,
		       "NAME", "STATE", "GEOMETRY", "SIZE", "USED", "MEMBERS",
		       "JOBS");
		for (i = 0; i < l->n_arrays; i++) {
			const Zarray__ArrayStatus *a = l->arrays[i];
			char geom[24];

			snprintf(geom, sizeof(geom), "%u+%u", a->data,
				 a->parity);
			printf("%-*s  %-8s  %-8s  %10s  %10s  %7zu  %zu\n",
			       (int)w, a->name,
			       za_cli_array_state_str(a->state), geom,
			       za_fmt_size(a->size_bytes, b1, sizeof(b1)),
			       za_fmt_size(a->used_bytes, b2, sizeof(b2)),
			       a->n_members, a->n_jobs);
		}
	}
	za_rpc_response_free(r);
	return ZA_EXIT_OK;
}

/* ---- watch ---- */

struct watch_view {
	bool tty, json;
	unsigned lines; /* drawn last time (tty) */
	int last_pct[8]; /* per job (piped): print on change only */
	int last_state[8];
};

static void watch_draw(struct watch_view *v, const Zarray__Event *ev,
		       bool final)
{
	char line[256];
	size_t i;

	if (v->json) {
		printf("{\"name\":");
		za_json_str(stdout, ev->name);
		printf(",\"state\":\"%s\",\"final\":%s,\"jobs\":[",
		       za_cli_array_state_str(ev->state),
		       final ? "true" : "false");
		for (i = 0; i < ev->n_jobs; i++) {
			if (i)
				putchar(',');
			za_cli_json_job(stdout, ev->jobs[i]);
		}
		printf("]}\n");
		fflush(stdout);
		return;
	}
	if (!ev->n_jobs) {
		printf("%s: no background job\n", ev->name);
		return;
	}
	if (v->tty) {
		/* Back to the first line we drew, then redraw each. */
		if (v->lines > 1)
			printf("\033[%uA", v->lines - 1);
		for (i = 0; i < ev->n_jobs; i++)
			printf("\r\033[K%s: %s%s", ev->name,
			       za_cli_job_line(ev->jobs[i], true, line,
					       sizeof(line)),
			       i + 1 < ev->n_jobs ? "\n" : "");
		v->lines = (unsigned)ev->n_jobs;
		if (final)
			putchar('\n');
		fflush(stdout);
		return;
	}
	for (i = 0; i < ev->n_jobs; i++) {
		const Zarray__JobStatus *j = ev->jobs[i];
		int pct = (int)job_pct(j);

		if (i < 8 && !final && pct == v->last_pct[i] &&
		    (int)j->state == v->last_state[i])
			continue;
		if (i < 8) {
			v->last_pct[i] = pct;
			v->last_state[i] = (int)j->state;
		}
		printf("%s: %s\n", ev->name,
		       za_cli_job_line(j, false, line, sizeof(line)));
	}
	fflush(stdout);
}

/*
 * The exit status of a watch that saw its jobs end: 0, or 1 with one
 * line when one ended short (a rebuild that left columns behind leaves
 * the array degraded: a script waiting for it must not go on as if it
 * were rebuilt).
 */
static int watch_result(const Zarray__Event *ev)
{
	size_t i;

	for (i = 0; i < ev->n_jobs; i++) {
		const Zarray__JobStatus *j = ev->jobs[i];

		if (!job_short(j))
			continue;
		if (j->error)
			fprintf(stderr,
				"zarray watch: %s: the %s stopped: %s\n",
				ev->name, za_cli_job_kind_str(j->kind),
				j->error);
		else
			fprintf(stderr,
				"zarray watch: %s: the %s ended with %llu lost "
				"column%s not restored; the array stays %s "
				"until a drive with room is added (see "
				"zarrayd's log)\n",
				ev->name, za_cli_job_kind_str(j->kind),
				(unsigned long long)j->columns_left,
				j->columns_left == 1 ? "" : "s",
				za_cli_array_state_str(ev->state));
		return ZA_EXIT_FAIL;
	}
	return ZA_EXIT_OK;
}

int za_cmd_watch(struct za_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	Zarray__Request req = ZARRAY__REQUEST__INIT;
	Zarray__Watch m = ZARRAY__WATCH__INIT;
	struct watch_view v = { 0 };
	struct za_client cl = { 0 };
	Zarray__Response *r = NULL;
	int c, rc = ZA_EXIT_FAIL, ret;

	optind = 0; /* re-initialise: main parsed with "+" */
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (c == 'j') {
			v.json = true;
		} else {
			ret = za_cli_opt_end("watch", c);
			if (ret >= 0)
				return ret;
		}
	}
	if (argc - optind != 1) {
		za_usage_error("watch", "one NAME expected");
		return ZA_EXIT_USAGE;
	}
	v.json |= cli->json;
	v.tty = !v.json && isatty(STDOUT_FILENO);
	memset(v.last_pct, 0xff, sizeof(v.last_pct));
	m.name = argv[optind];
	req.body_case = ZARRAY__REQUEST__BODY_WATCH;
	req.watch = &m;
	if (za_client_open(&cl, cli, "watch") < 0)
		return ZA_EXIT_FAIL;
	ret = za_client_call(&cl, &req, ZA_CLIENT_QUERY_MS, &r);
	while (ret == 0) {
		bool final = !(r->has_more && r->more);

		if (za_client_failed(&cl, r)) {
			if (v.tty && v.lines)
				putchar('\n');
			break;
		}
		if (r->body_case != ZARRAY__RESPONSE__BODY_EVENT) {
			fprintf(stderr, "zarray watch: unexpected answer from "
					"zarrayd\n");
			break;
		}
		watch_draw(&v, r->event, final);
		if (final) {
			rc = watch_result(r->event);
			break;
		}
		za_rpc_response_free(r);
		r = NULL;
		ret = za_client_next(&cl, WATCH_EVENT_MS, &r);
	}
	za_rpc_response_free(r);
	za_client_close(&cl);
	return rc;
}
