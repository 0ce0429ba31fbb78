// SHA-256 of many messages at once with the x86 SHA extensions, two messages interleaved.
//
// One message's rounds are a chain: each sha256rnds2 waits for the one before. A core runs
// that instruction more often than the chain lets it, so two independent messages hashed in
// the same loop keep it busier: two lanes, each refilled with the next message as soon as
// its full blocks are done (its last one or two padded blocks are hashed alone). The rounds
// follow FIPS 180-4 as the SHA extensions implement them (Intel's "New Instructions Supporting
// the Secure Hash Algorithm on Intel Architecture Processors", 2013).

#include "CXferShims.h"

#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__clang__) || defined(__GNUC__))
#include <cpuid.h>
#include <immintrin.h>

#define XFER_SHA_TARGET __attribute__((target("sha,ssse3,sse4.1")))

static const uint32_t round_constants[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static const uint32_t initial_state[8] = {
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
};

// A lane's state in the layout sha256rnds2 works on: ABEF and CDGH.
typedef struct {
    __m128i abef, cdgh;
} lane_state;

XFER_SHA_TARGET static lane_state lane_start(void) {
    __m128i abcd = _mm_loadu_si128((const __m128i *)&initial_state[0]);
    __m128i efgh = _mm_loadu_si128((const __m128i *)&initial_state[4]);
    abcd = _mm_shuffle_epi32(abcd, 0xB1);  // CDAB
    efgh = _mm_shuffle_epi32(efgh, 0x1B);  // EFGH
    lane_state s = {_mm_alignr_epi8(abcd, efgh, 8), _mm_blend_epi16(efgh, abcd, 0xF0)};
    return s;
}

XFER_SHA_TARGET static void lane_digest(lane_state s, uint8_t out[32]) {
    __m128i feba = _mm_shuffle_epi32(s.abef, 0x1B);
    __m128i dchg = _mm_shuffle_epi32(s.cdgh, 0xB1);
    __m128i dcba = _mm_blend_epi16(feba, dchg, 0xF0);
    __m128i hgfe = _mm_alignr_epi8(dchg, feba, 8);
    // The words are little-endian in the registers; a digest is big-endian.
    const __m128i swap = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
    _mm_storeu_si128((__m128i *)out, _mm_shuffle_epi8(dcba, swap));
    _mm_storeu_si128((__m128i *)(out + 16), _mm_shuffle_epi8(hgfe, swap));
}

// Four rounds (group g, 0...15) of one lane, with the message schedule's part that goes with
// them; m0...m3 hold the schedule's last sixteen words, m[g % 4] the current four.
#define XFER_SHA_GROUP(g, s, m0, m1, m2, m3, data)                                            \
    do {                                                                                      \
        __m128i *cur = ((g) % 4 == 0) ? &m0 : ((g) % 4 == 1) ? &m1 : ((g) % 4 == 2) ? &m2 : &m3; \
        __m128i *prev = ((g) % 4 == 0) ? &m3 : ((g) % 4 == 1) ? &m0 : ((g) % 4 == 2) ? &m1 : &m2; \
        __m128i *next = ((g) % 4 == 0) ? &m1 : ((g) % 4 == 1) ? &m2 : ((g) % 4 == 2) ? &m3 : &m0; \
        if ((g) < 4) *cur = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)((data) + 16 * (g))), swap); \
        __m128i k = _mm_add_epi32(*cur, _mm_loadu_si128((const __m128i *)&round_constants[4 * (g)])); \
        s.cdgh = _mm_sha256rnds2_epu32(s.cdgh, s.abef, k);                                    \
        if ((g) >= 3 && (g) <= 14) {                                                          \
            *next = _mm_sha256msg2_epu32(_mm_add_epi32(*next, _mm_alignr_epi8(*cur, *prev, 4)), *cur); \
        }                                                                                     \
        s.abef = _mm_sha256rnds2_epu32(s.abef, s.cdgh, _mm_shuffle_epi32(k, 0x0E));           \
        if ((g) >= 1 && (g) <= 12) *prev = _mm_sha256msg1_epu32(*prev, *cur);                 \
    } while (0)

#define XFER_SHA_BLOCK_START(s, save) lane_state save = s
#define XFER_SHA_BLOCK_END(s, save)                  \
    do {                                             \
        s.abef = _mm_add_epi32(s.abef, save.abef);   \
        s.cdgh = _mm_add_epi32(s.cdgh, save.cdgh);   \
    } while (0)

// `blocks` 64-byte blocks of one lane.
XFER_SHA_TARGET static void lane_blocks(lane_state *state, const uint8_t *data, size_t blocks) {
    const __m128i swap = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
    lane_state s = *state;
    for (; blocks > 0; blocks--, data += 64) {
        __m128i m0, m1, m2, m3;
        XFER_SHA_BLOCK_START(s, saved);
        XFER_SHA_GROUP(0, s, m0, m1, m2, m3, data);
        XFER_SHA_GROUP(1, s, m0, m1, m2, m3, data);
        XFER_SHA_GROUP(2, s, m0, m1, m2, m3, data);
        XFER_SHA_GROUP(3, s, m0, m1, m2, m3, data);
        XFER_SHA_GROUP(4, s, m0, m1, m2, m3, data);
        XFER_SHA_GROUP(5, s, m0, m1, m2, m3, data);
        XFER_SHA_GROUP(6, s, m0, m1, m2, m3, data);
        XFER_SHA_GROUP(7, s, m0, m1, m2, m3, data);
        XFER_SHA_GROUP(8, s, m0, m1, m2, m3, data);
        XFER_SHA_GROUP(9, s, m0, m1, m2, m3, data);
        XFER_SHA_GROUP(10, s, m0, m1, m2, m3, data);
        XFER_SHA_GROUP(11, s, m0, m1, m2, m3, data);
        XFER_SHA_GROUP(12, s, m0, m1, m2, m3, data);
        XFER_SHA_GROUP(13, s, m0, m1, m2, m3, data);
        XFER_SHA_GROUP(14, s, m0, m1, m2, m3, data);
        XFER_SHA_GROUP(15, s, m0, m1, m2, m3, data);
        XFER_SHA_BLOCK_END(s, saved);
    }
    *state = s;
}

// `blocks` blocks of each of two lanes, interleaved group by group.
XFER_SHA_TARGET static void lane_blocks_x2(
    lane_state *state_a, const uint8_t *a, lane_state *state_b, const uint8_t *b, size_t blocks) {
    const __m128i swap = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
    lane_state sa = *state_a, sb = *state_b;
    for (; blocks > 0; blocks--, a += 64, b += 64) {
        __m128i a0, a1, a2, a3, b0, b1, b2, b3;
        XFER_SHA_BLOCK_START(sa, saved_a);
        XFER_SHA_BLOCK_START(sb, saved_b);
#define XFER_SHA_PAIR(g)                                  \
    XFER_SHA_GROUP(g, sa, a0, a1, a2, a3, a);             \
    XFER_SHA_GROUP(g, sb, b0, b1, b2, b3, b)
        XFER_SHA_PAIR(0);
        XFER_SHA_PAIR(1);
        XFER_SHA_PAIR(2);
        XFER_SHA_PAIR(3);
        XFER_SHA_PAIR(4);
        XFER_SHA_PAIR(5);
        XFER_SHA_PAIR(6);
        XFER_SHA_PAIR(7);
        XFER_SHA_PAIR(8);
        XFER_SHA_PAIR(9);
        XFER_SHA_PAIR(10);
        XFER_SHA_PAIR(11);
        XFER_SHA_PAIR(12);
        XFER_SHA_PAIR(13);
        XFER_SHA_PAIR(14);
        XFER_SHA_PAIR(15);
#undef XFER_SHA_PAIR
        XFER_SHA_BLOCK_END(sa, saved_a);
        XFER_SHA_BLOCK_END(sb, saved_b);
    }
    *state_a = sa;
    *state_b = sb;
}

// The message's last partial block, its 0x80 and its length in bits: one or two blocks.
XFER_SHA_TARGET static void lane_finish(lane_state *state, const uint8_t *rest, size_t count, uint64_t length,
                                        uint8_t out[32]) {
    uint8_t tail[128];
    memset(tail, 0, sizeof tail);
    memcpy(tail, rest, count);
    tail[count] = 0x80;
    size_t blocks = count + 9 <= 64 ? 1 : 2;
    uint64_t bits = length * 8;
    for (int i = 0; i < 8; i++) tail[blocks * 64 - 1 - i] = (uint8_t)(bits >> (8 * i));
    lane_blocks(state, tail, blocks);
    lane_digest(*state, out);
}

typedef struct {
    size_t index;      // which message; count when the lane is idle
    size_t done;       // bytes of it hashed
    lane_state state;
} lane;

XFER_SHA_TARGET static int lane_take(lane *l, size_t *next, size_t count) {
    if (*next >= count) {
        l->index = count;
        return 0;
    }
    l->index = (*next)++;
    l->done = 0;
    l->state = lane_start();
    return 1;
}

// Finishes a lane whose full blocks are all hashed, then gives it the next message.
XFER_SHA_TARGET static void lane_retire(lane *l, const uint8_t *const *data, const size_t *lengths,
                                        uint8_t *digests, size_t *next, size_t count) {
    size_t length = lengths[l->index];
    lane_finish(&l->state, data[l->index] + l->done, length - l->done, length, digests + 32 * l->index);
    lane_take(l, next, count);
}

XFER_SHA_TARGET static void sha256_lanes(const uint8_t *const *data, const size_t *lengths, size_t count,
                                         uint8_t *digests) {
    size_t next = 0;
    lane lanes[2];
    lane_take(&lanes[0], &next, count);
    lane_take(&lanes[1], &next, count);
    while (lanes[0].index < count || lanes[1].index < count) {
        size_t left[2];
        for (int i = 0; i < 2; i++) {
            left[i] = lanes[i].index < count ? (lengths[lanes[i].index] - lanes[i].done) / 64 : 0;
        }
        if (lanes[0].index < count && lanes[1].index < count) {
            size_t both = left[0] < left[1] ? left[0] : left[1];
            lane_blocks_x2(&lanes[0].state, data[lanes[0].index] + lanes[0].done, &lanes[1].state,
                           data[lanes[1].index] + lanes[1].done, both);
            lanes[0].done += 64 * both;
            lanes[1].done += 64 * both;
            for (int i = 0; i < 2; i++) {
                if (left[i] == both) lane_retire(&lanes[i], data, lengths, digests, &next, count);
            }
        } else {
            lane *l = lanes[0].index < count ? &lanes[0] : &lanes[1];
            size_t blocks = (lengths[l->index] - l->done) / 64;
            lane_blocks(&l->state, data[l->index] + l->done, blocks);
            l->done += 64 * blocks;
            lane_retire(l, data, lengths, digests, &next, count);
        }
    }
}

int cxfer_sha256_lanes_available(void) {
    unsigned int a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    int ssse3 = (c >> 9) & 1, sse41 = (c >> 19) & 1;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    int sha = (b >> 29) & 1;
    return ssse3 && sse41 && sha;
}

void cxfer_sha256_lanes(const uint8_t *const *data, const size_t *lengths, size_t count, uint8_t *digests) {
    sha256_lanes(data, lengths, count, digests);
}

#else

int cxfer_sha256_lanes_available(void) { return 0; }

void cxfer_sha256_lanes(const uint8_t *const *data, const size_t *lengths, size_t count, uint8_t *digests) {
    (void)data;
    (void)lengths;
    (void)count;
    (void)digests;
}

#endif
