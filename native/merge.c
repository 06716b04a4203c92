/*
 * The compaction merge in native code: decode data blocks, merge them through a loser tree, apply the
 * cell rules and copy the kept entries into output data blocks, with no JavaScript object per entry.
 *
 * It does what src/storage/iterators/merge-blocks.ts, stack.ts (cellRules) and the writer's data-block
 * assembly do, for the case without filters, and must give the same bytes: the test suite runs both on
 * the same random inputs and compares the files (test/storage/native-merge.test.ts). The JavaScript
 * merge stays the reference and the fallback (src/storage/native-merge.ts says when each runs).
 *
 * Data block payload grammar (src/storage/rfile/codec.ts): Entry{count}, each
 *   flags:u8 rowLen:varint familyLen:varint qualifierLen:varint valueLen:varint timestamp:u64
 *   row family qualifier value
 * in the order: row, family, qualifier (unsigned bytes, a prefix first), timestamp newest first, a delete
 * marker before a put, then value bytes.
 *
 * Memory: the caller (JavaScript) owns every buffer. A source's blocks are Buffers it keeps alive: the
 * current one, and the one before it (the entry output last may lie there, and the next entry is
 * compared with it). Output goes into a Buffer it hands over with setOutput.
 */
#include <node_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DONE (-2)
#define FLUSH (-1)
#define SEAL (-3)
#define GROW (-4)
#define HEARTBEAT 65536
#define ERRLEN 256
/* Slots of run's figures; exported as `figures`, so that JavaScript refuses a binary built from an older
 * source (one that does not fill them all). */
#define FIGURES 12
/* Families an output block counts by name (file-stats.ts, MAX_FAMILIES); the others' entries together. */
#define MAX_FAMILIES 16

typedef struct {
  const uint8_t *base;
  uint32_t start, row, fam, qual, val, end;
  uint8_t del;
} Ent;

typedef struct {
  Ent *ents;
  uint32_t cap;
  uint32_t count;
  uint32_t pos;
  int live; /* 1 while the source has a current entry */
} Source;

typedef struct {
  const uint8_t *p;
  uint32_t len;
} Bytes;

/* A family of the output block: its bytes at `off` in the block (offsets survive resize, which moves
 * the bytes), and the block's entries of it. */
typedef struct {
  uint32_t off, len;
  uint32_t count;
} Family;

typedef struct {
  int k;
  Source *src;
  int *tree; /* tree[0] the winner, tree[1..k-1] the losers; leaf i at k + i */
  /* rules */
  double versions;
  double cutoff;
  int dropDeletes;
  /* bounds of the merged stream (a split's rows, a resumed run's cells after its checkpoint) */
  int hasStart, startInclusive, hasEnd, endInclusive, hasAfter;
  uint8_t *startRow, *endRow, *afterRow, *afterFam, *afterQual;
  uint32_t startLen, endLen, afterRowLen, afterFamLen, afterQualLen;
  /* cell state */
  int haveLast; /* `last`: the entry merged before the current one, kept or not */
  Ent last;
  int hidden;
  double seen;
  uint64_t countedTs;
  /* output block */
  uint8_t *out;
  uint32_t outCap, outPos, outStart, blockSize, outCount;
  uint32_t lastKeptStart, lastKeptEnd;
  /* the output block's figures (the file's stats, FileStats): delete markers, oldest and newest
   * timestamp, key and value bytes, and its first MAX_FAMILIES families in the order met (the entries
   * of the others in otherFamilies); prevSlot: the slot of the last entry's family (-1: other) */
  uint32_t outDeletes;
  uint64_t outOldest, outNewest, outKeyBytes, outValueBytes;
  Family families[MAX_FAMILIES];
  int familyCount, prevSlot;
  uint32_t prevFamOff, prevFamLen, otherFamilies;
  int sealBoundary;
  uint32_t need;
  /* the run's phase */
  int phase;   /* 0: pick a winner; 1: emit the winner (kept, waiting for room); 2: replay `pendingSource` */
  int pendingSource;
  int built;
  double read;
  uint32_t sinceBeat;
  int finished;
  char errbuf[ERRLEN];
} Merge;

/* ---- comparisons ---------------------------------------------------------------------------------- */

static inline uint64_t load64(const uint8_t *p) {
  uint64_t x;
  memcpy(&x, p, 8);
  return __builtin_bswap64(x); /* big-endian: word order is byte order */
}

/* Unsigned byte order of two ranges, a prefix first; only the sign is meaningful. Eight bytes at a time,
 * the last word overlapping the one before it (those bytes are equal by then). */
static inline int cmpRange(const uint8_t *a, uint32_t la, const uint8_t *b, uint32_t lb) {
  uint32_t n = la < lb ? la : lb;
  if (n >= 8) {
    uint32_t i = 0;
    for (; i + 8 <= n; i += 8) {
      uint64_t x = load64(a + i), y = load64(b + i);
      if (x != y) return x < y ? -1 : 1;
    }
    if (i < n) {
      uint64_t x = load64(a + n - 8), y = load64(b + n - 8);
      if (x != y) return x < y ? -1 : 1;
    }
  } else {
    for (uint32_t i = 0; i < n; i++)
      if (a[i] != b[i]) return a[i] < b[i] ? -1 : 1;
  }
  return la < lb ? -1 : la > lb ? 1 : 0;
}

static inline uint64_t tsOf(const Ent *e) { return load64(e->base + e->row - 8); }

static inline int cmpCell(const Ent *a, const Ent *b) {
  int c = cmpRange(a->base + a->row, a->fam - a->row, b->base + b->row, b->fam - b->row);
  if (c) return c;
  c = cmpRange(a->base + a->fam, a->qual - a->fam, b->base + b->fam, b->qual - b->fam);
  if (c) return c;
  return cmpRange(a->base + a->qual, a->val - a->qual, b->base + b->qual, b->val - b->qual);
}

static inline int sameCell(const Ent *a, const Ent *b) {
  uint32_t rl = a->fam - a->row, fl = a->qual - a->fam, ql = a->val - a->qual;
  if (rl != b->fam - b->row || fl != b->qual - b->fam || ql != b->val - b->qual) return 0;
  return memcmp(a->base + a->row, b->base + b->row, rl + fl + ql) == 0;
}

/* compareEntries: the key order, then the value bytes. */
static inline int cmpEnt(const Ent *a, const Ent *b) {
  int c = cmpCell(a, b);
  if (c) return c;
  uint64_t ta = tsOf(a), tb = tsOf(b);
  if (ta != tb) return ta > tb ? -1 : 1;
  if (a->del != b->del) return a->del ? -1 : 1;
  return cmpRange(a->base + a->val, a->end - a->val, b->base + b->val, b->end - b->val);
}

/* ---- decoding ------------------------------------------------------------------------------------- */

/* A varint of 2-5 bytes at pos (the first byte >= 0x80); 0 and errbuf set on damage. */
static int slowVarint(const uint8_t *b, uint32_t *pos, uint32_t end, uint32_t *out, char *errbuf) {
  uint64_t result = 0;
  uint32_t p = *pos;
  for (int i = 0; i < 5; i++) {
    if (p >= end) {
      snprintf(errbuf, ERRLEN, "varint at byte %u runs past the end of the block", p);
      return 0;
    }
    uint8_t x = b[p++];
    result += (uint64_t)(x & 0x7f) << (7 * i);
    if (x < 0x80) {
      if (x == 0) {
        snprintf(errbuf, ERRLEN, "varint at byte %u is not minimal", p - 1);
        return 0;
      }
      if (result > 0xffffffffULL) {
        snprintf(errbuf, ERRLEN, "varint at byte %u is 2^32 or more", p - 1);
        return 0;
      }
      *pos = p;
      *out = (uint32_t)result;
      return 1;
    }
  }
  snprintf(errbuf, ERRLEN, "varint at byte %u is longer than 5 bytes", p);
  return 0;
}

#define VARINT(dst)                                             \
  do {                                                          \
    dst = b[p++];                                               \
    if (dst >= 0x80) {                                          \
      p--;                                                      \
      if (!slowVarint(b, &p, end, &dst, errbuf)) return 0;              \
    }                                                           \
  } while (0)

/* Decodes a block's entries into s->ents, with every check of decodeDataBlock; 0 and errbuf on damage. */
static int decodeBlock(Source *s, const uint8_t *b, uint32_t end, uint32_t count, char *errbuf) {
  if ((double)count > (double)end / 13) {
    snprintf(errbuf, ERRLEN, "%u entries cannot fit in %u bytes", count, end);
    return 0;
  }
  if (count > s->cap) {
    Ent *grown = realloc(s->ents, (size_t)count * sizeof(Ent));
    if (!grown) {
      snprintf(errbuf, ERRLEN, "out of memory decoding %u entries", count);
      return 0;
    }
    s->ents = grown;
    s->cap = count;
  }
  uint32_t p = 0;
  for (uint32_t i = 0; i < count; i++) {
    Ent *e = &s->ents[i];
    e->base = b;
    e->start = p;
    if ((uint64_t)p + 13 > end) {
      snprintf(errbuf, ERRLEN, "entry %u at byte %u runs past the end of the block", i, p);
      return 0;
    }
    uint8_t flags = b[p++];
    if (flags > 1) {
      snprintf(errbuf, ERRLEN, "entry %u: bad flags 0x%x", i, flags);
      return 0;
    }
    uint32_t rl, fl, ql, vl;
    VARINT(rl);
    VARINT(fl);
    VARINT(ql);
    VARINT(vl);
    if ((uint64_t)p + 8 > end) {
      snprintf(errbuf, ERRLEN, "entry %u: timestamp runs past the end of the block", i);
      return 0;
    }
    uint32_t hi = ((uint32_t)b[p] << 24) | ((uint32_t)b[p + 1] << 16) | ((uint32_t)b[p + 2] << 8) | b[p + 3];
    if (hi >= 0x200000) {
      snprintf(errbuf, ERRLEN, "entry %u: timestamp is 2^53 or more", i);
      return 0;
    }
    uint64_t row = (uint64_t)p + 8;
    uint64_t fam = row + rl, qual = fam + fl, val = qual + ql, stop = val + vl;
    if (stop > end) {
      snprintf(errbuf, ERRLEN, "entry %u: fields run past the end of the block", i);
      return 0;
    }
    e->row = (uint32_t)row;
    e->fam = (uint32_t)fam;
    e->qual = (uint32_t)qual;
    e->val = (uint32_t)val;
    e->end = (uint32_t)stop;
    e->del = flags;
    p = (uint32_t)stop;
    if (i > 0 && cmpEnt(&s->ents[i - 1], e) > 0) {
      snprintf(errbuf, ERRLEN, "entry %u is out of order", i);
      return 0;
    }
  }
  if (p != end) {
    snprintf(errbuf, ERRLEN, "%u bytes after the last entry", end - p);
    return 0;
  }
  return 1;
}

/* ---- the loser tree ------------------------------------------------------------------------------- */

static inline const Ent *head(Merge *m, int i) {
  Source *s = &m->src[i];
  return s->live ? &s->ents[s->pos] : NULL;
}

/* Whether source a's head comes before source b's (equal entries: the lower source first). */
static inline int before(Merge *m, int a, int b) {
  const Ent *x = head(m, a), *y = head(m, b);
  if (!y) return x != NULL || a < b;
  if (!x) return 0;
  int c = cmpEnt(x, y);
  return c < 0 || (c == 0 && a < b);
}

static int build(Merge *m, int node) {
  if (node >= m->k) return node - m->k;
  int l = build(m, 2 * node), r = build(m, 2 * node + 1);
  if (before(m, l, r)) {
    m->tree[node] = r;
    return l;
  }
  m->tree[node] = l;
  return r;
}

static void replay(Merge *m, int w) {
  for (int node = (w + m->k) >> 1; node > 0; node >>= 1) {
    int l = m->tree[node];
    if (before(m, l, w)) {
      m->tree[node] = w;
      w = l;
    }
  }
  m->tree[0] = w;
}

/* ---- bounds and rules ----------------------------------------------------------------------------- */

/* -1: before the merged stream's bounds (skip), 0: inside, 1: past the end (the merge is over). */
static int bounds(Merge *m, const Ent *e) {
  const uint8_t *row = e->base + e->row;
  uint32_t rl = e->fam - e->row;
  if (m->hasEnd) {
    int c = cmpRange(row, rl, m->endRow, m->endLen);
    if (c > 0 || (c == 0 && !m->endInclusive)) return 1;
  }
  if (m->hasStart) {
    int c = cmpRange(row, rl, m->startRow, m->startLen);
    if (c < 0 || (c == 0 && !m->startInclusive)) return -1;
  }
  if (m->hasAfter) {
    int c = cmpRange(row, rl, m->afterRow, m->afterRowLen);
    if (!c) c = cmpRange(e->base + e->fam, e->qual - e->fam, m->afterFam, m->afterFamLen);
    if (!c) c = cmpRange(e->base + e->qual, e->val - e->qual, m->afterQual, m->afterQualLen);
    if (c <= 0) return -1;
  }
  return 0;
}

/* cellRules (stack.ts): whether e, the next entry in merged order, is kept. */
static int accept(Merge *m, const Ent *e) {
  if (!m->haveLast || !sameCell(&m->last, e)) {
    m->hidden = 0;
    m->seen = 0;
  }
  m->haveLast = 1;
  m->last = *e;
  if (m->hidden) return 0;
  if (e->del) {
    m->hidden = 1;
    return !m->dropDeletes;
  }
  if (m->seen >= m->versions) return 0;
  uint64_t ts = tsOf(e);
  if (m->seen > 0 && ts == m->countedTs) return 0;
  m->seen++;
  m->countedTs = ts;
  if (m->cutoff > 0 && (double)ts < m->cutoff) return 0;
  return 1;
}

/* Counts an entry of the output block whose family is at `off` in it, `len` bytes (file-stats.ts,
 * BlockTally: the same rule). */
static void countFamily(Merge *m, uint32_t off, uint32_t len) {
  const uint8_t *fam = m->out + off;
  int slot = -1;
  /* Consecutive entries mostly share their family: the last entry's, in the block, first. */
  if (m->outCount > 0 && len == m->prevFamLen && memcmp(m->out + m->prevFamOff, fam, len) == 0) {
    slot = m->prevSlot;
  } else {
    int i = 0;
    for (; i < m->familyCount; i++) {
      Family *f = &m->families[i];
      if (f->len == len && memcmp(m->out + f->off, fam, len) == 0) break;
    }
    if (i < m->familyCount) {
      slot = i;
    } else if (m->familyCount < MAX_FAMILIES) {
      slot = m->familyCount++;
      m->families[slot].off = off;
      m->families[slot].len = len;
      m->families[slot].count = 0;
    }
  }
  m->prevFamOff = off;
  m->prevFamLen = len;
  m->prevSlot = slot;
  if (slot < 0) m->otherFamilies++;
  else m->families[slot].count++;
}

/* Copies a kept entry into the output block, or says why it cannot yet (SEAL, GROW); 0 when done. */
static int emit(Merge *m, const Ent *e) {
  uint32_t size = e->end - e->start;
  if (m->outCount > 0 && m->outPos - m->outStart + size > m->blockSize) {
    Ent prev = {m->out, 0, 0, 0, 0, 0, 0, 0};
    char *errbuf = m->errbuf;
    /* The last kept entry, in the output block: its fields again, from its own bytes. */
    const uint8_t *b = m->out;
    uint32_t p = m->lastKeptStart + 1, end = m->lastKeptEnd, rl, fl, ql, vl;
    VARINT(rl);
    VARINT(fl);
    VARINT(ql);
    VARINT(vl);
    (void)vl;
    prev.row = p + 8;
    prev.fam = prev.row + rl;
    prev.qual = prev.fam + fl;
    prev.val = prev.qual + ql;
    m->sealBoundary = !sameCell(&prev, e);
    return SEAL;
  }
  if (m->outPos + size > m->outCap) {
    m->need = m->outPos + size;
    return GROW;
  }
  memcpy(m->out + m->outPos, e->base + e->start, size);
  /* Before outCount counts it: countFamily compares with the entry before it only if there is one. */
  countFamily(m, m->outPos + (e->fam - e->start), e->qual - e->fam);
  m->lastKeptStart = m->outPos;
  m->outPos += size;
  m->lastKeptEnd = m->outPos;
  m->outCount++;
  uint64_t ts = tsOf(e);
  if (ts < m->outOldest) m->outOldest = ts;
  if (ts > m->outNewest) m->outNewest = ts;
  m->outDeletes += e->del;
  m->outKeyBytes += e->val - e->row;
  m->outValueBytes += e->end - e->val;
  return 0;
}

/*
 * Runs the merge until it needs something: a source's next block (its index), room for the output
 * (SEAL: the block is full; GROW: a buffer of `need` bytes), a turn of the event loop (FLUSH), or the
 * end (DONE).
 */
static int run(Merge *m) {
  if (m->finished) return DONE;
  if (!m->built) {
    m->tree[0] = m->k == 1 ? 0 : build(m, 1);
    m->built = 1;
  }
  for (;;) {
    if (m->phase == 2) {
      replay(m, m->pendingSource);
      m->phase = 0;
    }
    int w = m->tree[0];
    Source *s = &m->src[w];
    if (!s->live) {
      m->finished = 1;
      return DONE;
    }
    const Ent *e = &s->ents[s->pos];
    if (m->phase == 0) {
      int b = bounds(m, e);
      if (b > 0) {
        m->finished = 1;
        return DONE;
      }
      if (b == 0) m->read++;
      m->phase = b == 0 && accept(m, e) ? 1 : 3;
    }
    if (m->phase == 1) {
      int r = emit(m, e);
      if (r) return r;
    }
    /* e is done with: its source's next entry, or its next block. */
    m->phase = 2;
    m->pendingSource = w;
    if (++s->pos >= s->count) return w;
    if (++m->sinceBeat >= HEARTBEAT) {
      m->sinceBeat = 0;
      return FLUSH;
    }
  }
}

/* ---- Node-API ------------------------------------------------------------------------------------- */

#define CHECK(call)                                                   \
  do {                                                                \
    if ((call) != napi_ok) {                                          \
      napi_throw_error(env, "EXC_NATIVE", "native merge: " #call);   \
      return NULL;                                                    \
    }                                                                 \
  } while (0)

static void finalize(napi_env env, void *data, void *hint) {
  (void)env;
  (void)hint;
  Merge *m = data;
  for (int i = 0; i < m->k; i++) free(m->src[i].ents);
  free(m->src);
  free(m->tree);
  free(m->startRow);
  free(m->endRow);
  free(m->afterRow);
  free(m->afterFam);
  free(m->afterQual);
  free(m);
}

static Merge *unwrap(napi_env env, napi_value v) {
  void *data = NULL;
  if (napi_get_value_external(env, v, &data) != napi_ok || !data) {
    napi_throw_type_error(env, "EXC_NATIVE", "native merge: not a merge handle");
    return NULL;
  }
  return data;
}

/* A Buffer argument copied into malloc'ed memory; 0 when the value is null or undefined. */
static int copyBytes(napi_env env, napi_value v, uint8_t **out, uint32_t *len) {
  napi_valuetype t;
  napi_typeof(env, v, &t);
  if (t == napi_null || t == napi_undefined) return 0;
  void *data = NULL;
  size_t n = 0;
  napi_get_buffer_info(env, v, &data, &n);
  *out = malloc(n ? n : 1);
  if (n) memcpy(*out, data, n);
  *len = (uint32_t)n;
  return 1;
}

static double numberProp(napi_env env, napi_value obj, const char *name) {
  napi_value v;
  double d = 0;
  napi_get_named_property(env, obj, name, &v);
  napi_get_value_double(env, v, &d);
  return d;
}

static int boolProp(napi_env env, napi_value obj, const char *name) {
  napi_value v;
  bool b = false;
  napi_get_named_property(env, obj, name, &v);
  napi_get_value_bool(env, v, &b);
  return b;
}

/* create(k, { versions, cutoff, dropDeletes, blockSize, startRow, startInclusive, endRow, endInclusive,
 *             afterRow, afterFamily, afterQualifier }) -> handle */
static napi_value Create(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  int32_t k = 0;
  CHECK(napi_get_value_int32(env, argv[0], &k));
  if (k < 1 || k > 1000000) {
    napi_throw_range_error(env, "EXC_NATIVE", "native merge: bad number of sources");
    return NULL;
  }
  Merge *m = calloc(1, sizeof(Merge));
  m->k = k;
  m->src = calloc((size_t)k, sizeof(Source));
  m->tree = calloc((size_t)k, sizeof(int));
  napi_value o = argv[1];
  m->versions = numberProp(env, o, "versions");
  m->cutoff = numberProp(env, o, "cutoff");
  m->dropDeletes = boolProp(env, o, "dropDeletes");
  m->blockSize = (uint32_t)numberProp(env, o, "blockSize");
  napi_value v;
  napi_get_named_property(env, o, "startRow", &v);
  m->hasStart = copyBytes(env, v, &m->startRow, &m->startLen);
  m->startInclusive = boolProp(env, o, "startInclusive");
  napi_get_named_property(env, o, "endRow", &v);
  m->hasEnd = copyBytes(env, v, &m->endRow, &m->endLen);
  m->endInclusive = boolProp(env, o, "endInclusive");
  napi_get_named_property(env, o, "afterRow", &v);
  m->hasAfter = copyBytes(env, v, &m->afterRow, &m->afterRowLen);
  if (m->hasAfter) {
    napi_get_named_property(env, o, "afterFamily", &v);
    if (!copyBytes(env, v, &m->afterFam, &m->afterFamLen)) m->afterFam = calloc(1, 1);
    napi_get_named_property(env, o, "afterQualifier", &v);
    if (!copyBytes(env, v, &m->afterQual, &m->afterQualLen)) m->afterQual = calloc(1, 1);
  }
  napi_value handle;
  CHECK(napi_create_external(env, m, finalize, NULL, &handle));
  return handle;
}

/*
 * setBlock(handle, i, payload | null, count) -> undefined | error message. The block becomes source i's
 * current block (null: the source is exhausted). Its first entry must not come before the last entry of
 * the source's block before it (still alive: the caller keeps it).
 */
static napi_value SetBlock(napi_env env, napi_callback_info info) {
  size_t argc = 4;
  napi_value argv[4];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  Merge *m = unwrap(env, argv[0]);
  if (!m) return NULL;
  int32_t i = 0;
  CHECK(napi_get_value_int32(env, argv[1], &i));
  if (i < 0 || i >= m->k) {
    napi_throw_range_error(env, "EXC_NATIVE", "native merge: bad source");
    return NULL;
  }
  Source *s = &m->src[i];
  napi_valuetype t;
  napi_typeof(env, argv[2], &t);
  napi_value result;
  napi_get_undefined(env, &result);
  if (t == napi_null) {
    s->live = 0;
    return result;
  }
  void *data = NULL;
  size_t len = 0;
  CHECK(napi_get_buffer_info(env, argv[2], &data, &len));
  uint32_t count = 0;
  CHECK(napi_get_value_uint32(env, argv[3], &count));
  Ent last;
  memset(&last, 0, sizeof last);
  int hadLast = s->count > 0;
  if (hadLast) last = s->ents[s->count - 1];
  if (len > 0xffffffffu || !decodeBlock(s, data, (uint32_t)len, count, m->errbuf)) {
    s->live = 0;
    s->count = 0;
    napi_create_string_utf8(env, m->errbuf, NAPI_AUTO_LENGTH, &result);
    return result;
  }
  if (hadLast && cmpEnt(&last, &s->ents[0]) > 0) {
    s->live = 0;
    s->count = 0;
    snprintf(m->errbuf, ERRLEN, "merge source %d is out of order", i);
    napi_create_string_utf8(env, m->errbuf, NAPI_AUTO_LENGTH, &result);
    return result;
  }
  s->count = count;
  s->pos = 0;
  s->live = count > 0;
  return result;
}

/* setOutput(handle, buffer, start): the next output block goes into buffer from byte `start`. */
static napi_value SetOutput(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  Merge *m = unwrap(env, argv[0]);
  if (!m) return NULL;
  void *data = NULL;
  size_t len = 0;
  CHECK(napi_get_buffer_info(env, argv[1], &data, &len));
  uint32_t start = 0;
  CHECK(napi_get_value_uint32(env, argv[2], &start));
  m->out = data;
  m->outCap = (uint32_t)len;
  m->outStart = m->outPos = start;
  m->outCount = 0;
  m->outDeletes = 0;
  m->outOldest = UINT64_MAX;
  m->outNewest = 0;
  m->outKeyBytes = 0;
  m->outValueBytes = 0;
  m->familyCount = 0;
  m->otherFamilies = 0;
  return NULL;
}

/* resize(handle, buffer): the output block moves to a larger buffer, its bytes so far copied there. */
static napi_value Resize(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  Merge *m = unwrap(env, argv[0]);
  if (!m) return NULL;
  void *data = NULL;
  size_t len = 0;
  CHECK(napi_get_buffer_info(env, argv[1], &data, &len));
  if (len < m->outPos) {
    napi_throw_range_error(env, "EXC_NATIVE", "native merge: the new output buffer is smaller");
    return NULL;
  }
  m->out = data;
  m->outCap = (uint32_t)len;
  return NULL;
}

/*
 * run(handle, figures: Float64Array(FIGURES)) -> status. figures: [0] the end of the output block's
 * entries, [1] its entry count, [2] and [3] the start and end of its last entry, [4] 1 when that entry
 * ends a cell (SEAL), [5] entries merged so far, [6] bytes needed (GROW), [7] the block's delete markers,
 * [8] and [9] its oldest and newest timestamp (exact: timestamps are below 2^53; meaningless while it
 * has no entry), [10] and [11] its key bytes (row, family, qualifier) and value bytes.
 */
static napi_value Run(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  Merge *m = unwrap(env, argv[0]);
  if (!m) return NULL;
  void *data = NULL;
  size_t n = 0;
  napi_typedarray_type type;
  napi_value ab;
  size_t off;
  CHECK(napi_get_typedarray_info(env, argv[1], &type, &n, &data, &ab, &off));
  if (type != napi_float64_array || n < FIGURES) {
    napi_throw_type_error(env, "EXC_NATIVE", "native merge: figures must be a Float64Array(12)");
    return NULL;
  }
  int status = run(m);
  double *f = data;
  f[0] = m->outPos;
  f[1] = m->outCount;
  f[2] = m->lastKeptStart;
  f[3] = m->lastKeptEnd;
  f[4] = m->sealBoundary;
  f[5] = m->read;
  f[6] = m->need;
  f[7] = m->outDeletes;
  f[8] = (double)m->outOldest;
  f[9] = (double)m->outNewest;
  f[10] = (double)m->outKeyBytes;
  f[11] = (double)m->outValueBytes;
  napi_value result;
  CHECK(napi_create_int32(env, status, &result));
  return result;
}

/*
 * families(handle) -> [families: [Buffer, number][], otherFamilies: number]: the output block's
 * families in the order met (copies of their bytes) with their entries, and the entries of the other
 * families. Called once the block is sealed (SEAL, DONE), before setOutput starts the next.
 */
static napi_value Families(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  Merge *m = unwrap(env, argv[0]);
  if (!m) return NULL;
  napi_value list, result, other;
  CHECK(napi_create_array_with_length(env, (size_t)m->familyCount, &list));
  for (int i = 0; i < m->familyCount; i++) {
    const Family *f = &m->families[i];
    napi_value pair, name, count;
    CHECK(napi_create_array_with_length(env, 2, &pair));
    CHECK(napi_create_buffer_copy(env, f->len, m->out + f->off, NULL, &name));
    CHECK(napi_create_uint32(env, f->count, &count));
    CHECK(napi_set_element(env, pair, 0, name));
    CHECK(napi_set_element(env, pair, 1, count));
    CHECK(napi_set_element(env, list, (uint32_t)i, pair));
  }
  CHECK(napi_create_array_with_length(env, 2, &result));
  CHECK(napi_create_uint32(env, m->otherFamilies, &other));
  CHECK(napi_set_element(env, result, 0, list));
  CHECK(napi_set_element(env, result, 1, other));
  return result;
}

static napi_value Init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
      {"create", NULL, Create, NULL, NULL, NULL, napi_default, NULL},
      {"setBlock", NULL, SetBlock, NULL, NULL, NULL, napi_default, NULL},
      {"setOutput", NULL, SetOutput, NULL, NULL, NULL, napi_default, NULL},
      {"resize", NULL, Resize, NULL, NULL, NULL, napi_default, NULL},
      {"run", NULL, Run, NULL, NULL, NULL, napi_default, NULL},
      {"families", NULL, Families, NULL, NULL, NULL, napi_default, NULL},
  };
  napi_define_properties(env, exports, sizeof props / sizeof props[0], props);
  napi_value figures;
  napi_create_int32(env, FIGURES, &figures);
  napi_set_named_property(env, exports, "figures", figures);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, Init)
