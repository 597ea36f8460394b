// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fuzz-rpc.c - fuzz target: the control protocol's frame length check,
 * za_rpc_frame_len(), and message decoders, za_rpc_decode_request() and
 * za_rpc_decode_response() (protobuf-c underneath: CVE-2022-33070 and
 * CVE-2022-48468 were bugs there).
 *
 * Input: one mode byte (bit 0: a Response, else a Request), a 4-byte
 * frame header, then the body. The header is checked on its own (the
 * server does so before it allocates for the body); the body is decoded
 * whatever the header says.
 *
 * Oracles: the length check accepts exactly 1..ZA_RPC_MAX_FRAME_BYTES; a
 * decoded message has its required fields (protobuf_c_message_check());
 * and it packs, and what it packs to decodes and packs again to the same
 * bytes (unknown fields included; see has_tag0() for the one exception).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "rpc.h"

/*
 * protobuf-c 1.4.1 accepts a field number 0 when the tag is encoded in
 * more bytes than needed (82 00), keeps it as an unknown field, packs it
 * minimally (02 00) and then refuses that. Unknown fields are ignored by
 * both ends, so that quirk is tolerated here, and only that one.
 */
static bool has_tag0(const ProtobufCMessage *m)
{
	const ProtobufCMessageDescriptor *d = m->descriptor;
	const char *base = (const char *)m;
	unsigned i;
	size_t j;

	for (i = 0; i < m->n_unknown_fields; i++) {
		if (m->unknown_fields[i].tag == 0)
			return true;
	}
	for (i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		const ProtobufCMessage *sub;

		if (f->type != PROTOBUF_C_TYPE_MESSAGE)
			continue;
		if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			size_t n =
				*(const size_t *)(base + f->quantifier_offset);
			ProtobufCMessage *const *arr =
				*(ProtobufCMessage *const *const *)(base +
								    f->offset);

			for (j = 0; j < n; j++) {
				if (has_tag0(arr[j]))
					return true;
			}
			continue;
		}
		if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
		    *(const uint32_t *)(base + f->quantifier_offset) != f->id)
			continue;
		sub = *(ProtobufCMessage *const *)(base + f->offset);
		if (sub && has_tag0(sub))
			return true;
	}
	return false;
}

static void check_repack(const ProtobufCMessage *m, bool is_resp)
{
	ProtobufCMessage *m2;
	uint8_t *a, *b;
	size_t la, lb;
	int ret;

	ZA_FUZZ_CHECK(protobuf_c_message_check(m),
		      "a decoded message misses a required field");
	la = protobuf_c_message_get_packed_size(m);
	a = malloc(la ? la : 1);
	if (!a)
		abort();
	ZA_FUZZ_CHECK(protobuf_c_message_pack(m, a) == la,
		      "packed size and pack disagree");
	if (!la) {
		/* Every field of Request and Response is required. */
		free(a);
		ZA_FUZZ_CHECK(false, "a decoded message packs to nothing");
	}
	if (is_resp) {
		Zarray__Response *r;

		ret = za_rpc_decode_response(a, la, &r);
		m2 = ret ? NULL : &r->base;
	} else {
		Zarray__Request *r;

		ret = za_rpc_decode_request(a, la, &r);
		m2 = ret ? NULL : &r->base;
	}
	if (!m2) {
		ZA_FUZZ_CHECK(has_tag0(m),
			      "a decoded message packs to bytes that do not "
			      "decode");
		free(a);
		return;
	}
	lb = protobuf_c_message_get_packed_size(m2);
	b = malloc(lb ? lb : 1);
	if (!b)
		abort();
	ZA_FUZZ_CHECK(protobuf_c_message_pack(m2, b) == lb && lb == la &&
			      !memcmp(a, b, la),
		      "decode and pack are not stable");
	protobuf_c_message_free_unpacked(m2, NULL);
	free(a);
	free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t hdr[ZA_RPC_HDR_BYTES];
	uint8_t *body;
	uint32_t len = 0, v;
	bool is_resp;
	int ret;

	za_fuzz_init();
	if (size < 1 + ZA_RPC_HDR_BYTES)
		return 0;
	is_resp = data[0] & 1;
	memcpy(hdr, data + 1, ZA_RPC_HDR_BYTES);
	data += 1 + ZA_RPC_HDR_BYTES;
	size -= 1 + ZA_RPC_HDR_BYTES;

	v = (uint32_t)hdr[0] << 24 | (uint32_t)hdr[1] << 16 |
	    (uint32_t)hdr[2] << 8 | hdr[3];
	ret = za_rpc_frame_len(hdr, &len);
	if (v >= 1 && v <= ZA_RPC_MAX_FRAME_BYTES)
		ZA_FUZZ_CHECK(ret == 0 && len == v,
			      "frame length in range refused");
	else
		ZA_FUZZ_CHECK(ret == -EMSGSIZE,
			      "frame length out of range accepted");

	/* An exact copy, so that ASan sees a read past the body. */
	body = malloc(size ? size : 1);
	if (!body)
		abort();
	memcpy(body, data, size);
	if (is_resp) {
		Zarray__Response *r = NULL;

		ret = za_rpc_decode_response(body, size, &r);
		ZA_FUZZ_CHECK(ret == 0 || ret == -EBADMSG,
			      "za_rpc_decode_response: undocumented error");
		if (ret == 0) {
			check_repack(&r->base, true);
			za_rpc_response_free(r);
		}
	} else {
		Zarray__Request *r = NULL;

		ret = za_rpc_decode_request(body, size, &r);
		ZA_FUZZ_CHECK(ret == 0 || ret == -EBADMSG,
			      "za_rpc_decode_request: undocumented error");
		if (ret == 0) {
			check_repack(&r->base, false);
			za_rpc_request_free(r);
		}
	}
	free(body);
	return 0;
}
