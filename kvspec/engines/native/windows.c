/* kvspec native explicit-state search: the windowed breadth-first search (one thread
 * or several). Spliced into engine.c at its windows placeholder by codegen.py before
 * the program is compiled, so it is one translation unit with the rest of the engine. */

/* ---- several worker threads ------------------------------------------------------------
 * The queue is worked through in windows of up to KV_NCHUNK chunks. The workers expand
 * the states of a window, a chunk of KV_CHUNK at a time: every successor is
 * canonicalised, packed, hashed and looked up in the table, which nobody writes
 * meanwhile; one that may be new, or whose transition violates a property, is kept as a
 * record (with the invariants it violates). Then this thread stores the records state
 * by state, in the order of the single-threaded search and with its checks between two
 * states: the states get the same indices and parents, and the verdicts, counts and
 * counterexamples are the same. */
#define KV_CHUNK 64     /* states per chunk (at most) */
#define KV_NCHUNK 128   /* chunks per window */
#define KV_SOLO_NCHUNK 8  /* chunks per window of one thread: its records stay in cache */

typedef struct kv_rec {
    uint64_t w[NW];
    uint64_t hash, viol, bad;  /* bad: the invariants the successor violates */
    int64_t inst;
    int64_t kind;              /* 0: stored already (kept for viol), 1: maybe new, 2: maybe
                                * new and evaluating an invariant errs on it, 3: maybe new,
                                * invariants not evaluated yet */
} kv_rec;

typedef struct kv_chunk {
    kv_rec *rec;
    int64_t nrec, cap;
    int64_t end[KV_CHUNK];     /* the records of the chunk's k-th state end at end[k] */
    int64_t trans[KV_CHUNK];   /* its transitions */
    int64_t err[KV_CHUNK];     /* 1 + the instance whose error condition held; -1: no memory */
} kv_chunk;

typedef struct kv_pool {
    kv_ctx *c;                 /* the search */
    kv_ctx *w;                 /* per worker (0: the calling thread) */
    kv_result *wr;             /* per worker: where the generated code notes an error */
    int64_t *cov;              /* coverage counts of workers 1 .. */
    pthread_t *tid;
    struct kv_arg { struct kv_pool *pool; int64_t i; } *arg;
    int64_t nw, started;
    int64_t per;               /* states per chunk */
    int64_t nchunk;            /* chunks per window (at most KV_NCHUNK) */
    kv_chunk chunk[KV_NCHUNK];
    int64_t first, count;      /* the window: states first .. first + count - 1 */
    int64_t next;              /* the next chunk to expand (atomic) */
    int64_t round, busy, quit;
    pthread_mutex_t mu;
    pthread_cond_t go, idle;
} kv_pool;

/* a worker's successor: a record when it may be new or its transition violates */
static int kv_collect(kv_ctx *c, const uint64_t *w, int64_t inst, uint64_t viol) {
    kv_chunk *o = c->out;
    uint64_t h = kv_hash(w), slot;
    int known = !c->solo && kv_probe(c->shared, w, h, &slot) >= 0;
    o->trans[c->cur]++;
    if (known && !viol) return 0;
    if (o->nrec == o->cap) {
        int64_t cap = o->cap * 2 + 256;
        kv_rec *x = realloc(o->rec, (size_t)cap * sizeof(kv_rec));
        if (!x) { c->oom = 1; return 1; }
        o->rec = x;
        o->cap = cap;
    }
    kv_rec *x = &o->rec[o->nrec++];
    memcpy(x->w, w, sizeof x->w);
    x->hash = h; x->viol = viol; x->inst = inst; x->bad = 0; x->kind = !known;
    if (c->solo) x->kind = 3;
    else if (!known) {
        int64_t s[NSLOTS];
        kv_decode(w, s);
        if (kv_inv_err(s)) x->kind = 2;
        else x->bad = kv_inv_bad(s);
    }
    return 0;
}

static void kv_expand_chunk(kv_pool *P, kv_ctx *c, int64_t k) {
    kv_chunk *o = &P->chunk[k];
    int64_t from = P->first + k * P->per, to = from + P->per;
    if (to > P->first + P->count) to = P->first + P->count;
    uint64_t w[NW];
    int64_t s[NSLOTS];
    o->nrec = 0;
    c->out = o;
    for (int64_t i = from; i < to; i++) {
        int j = (int)(i - from);
        c->cur = j;
        o->trans[j] = 0;
        o->err[j] = 0;
        kv_load(P->c, i, w);
        kv_decode(w, s);
        c->head = i;
        int failed = kv_expand(c, w, s);
        o->end[j] = o->nrec;
        if (failed) {  /* the search stops at this state */
            o->err[j] = c->oom ? -1 : 1 + c->r->err_inst;
            return;
        }
    }
}

static void kv_work(kv_pool *P, kv_ctx *c) {
    int64_t chunks = (P->count + P->per - 1) / P->per;
    for (;;) {
        int64_t k = __atomic_fetch_add(&P->next, 1, __ATOMIC_RELAXED);
        if (k >= chunks) return;
        kv_expand_chunk(P, c, k);
    }
}

static void *kv_worker(void *arg) {
    kv_pool *P = ((struct kv_arg *)arg)->pool;
    kv_ctx *c = &P->w[((struct kv_arg *)arg)->i];
    int64_t seen = 0;
    pthread_mutex_lock(&P->mu);
    for (;;) {
        while (P->round == seen && !P->quit) pthread_cond_wait(&P->go, &P->mu);
        if (P->quit) break;
        seen = P->round;
        pthread_mutex_unlock(&P->mu);
        kv_work(P, c);
        pthread_mutex_lock(&P->mu);
        if (--P->busy == 0) pthread_cond_signal(&P->idle);
    }
    pthread_mutex_unlock(&P->mu);
    return NULL;
}

/* the successors of the window first .. first + count - 1, by all workers (a window of
 * one chunk by this thread alone) */
static void kv_pool_expand(kv_pool *P, int64_t first, int64_t count) {
    P->first = first;
    P->count = count;
    P->next = 0;
    if (count <= P->per || !P->started) {
        kv_work(P, &P->w[0]);
        return;
    }
    pthread_mutex_lock(&P->mu);
    P->busy = P->started;
    P->round++;
    pthread_cond_broadcast(&P->go);
    pthread_mutex_unlock(&P->mu);
    kv_work(P, &P->w[0]);
    pthread_mutex_lock(&P->mu);
    while (P->busy > 0) pthread_cond_wait(&P->idle, &P->mu);
    pthread_mutex_unlock(&P->mu);
}

/* the search stopped before the window's state `pos`: take back what the states from
 * there on added to the coverage counts (expanding them again, counting into scratch) */
static void kv_uncount(kv_pool *P, int64_t pos) {
    kv_ctx *w = &P->w[0];
    int64_t *cov_inst = w->cov_inst, *cov_ev = w->cov_ev;
    int64_t *scratch = calloc(NINST + NKINDS, sizeof(int64_t));
    if (!scratch) return;
    w->cov_inst = scratch;
    w->cov_ev = scratch + NINST;
    uint64_t sw[NW];
    int64_t s[NSLOTS];
    for (int64_t k = pos / P->per; k * P->per < P->count; k++) {
        kv_chunk *o = &P->chunk[k];
        int64_t from = k * P->per > pos ? k * P->per : pos, to = (k + 1) * P->per;
        if (to > P->count) to = P->count;
        w->out = o;
        for (int64_t i = from; i < to; i++) {
            w->cur = (int)(i - k * P->per);
            kv_load(P->c, P->first + i, sw);
            kv_decode(sw, s);
            w->head = P->first + i;
            if (kv_expand(w, sw, s)) break;  /* as far as the first expansion went */
        }
    }
    for (int k = 0; k < NINST; k++) cov_inst[k] -= scratch[k];
    for (int k = 0; k < NKINDS; k++) cov_ev[k] -= scratch[NINST + k];
    w->cov_inst = cov_inst;
    w->cov_ev = cov_ev;
    free(scratch);
}

/* Storing a window's records, the lookups run ahead: the table slot of the record
 * 2 * KV_AHEAD on is fetched, and for the record KV_AHEAD on (its slot fetched by then)
 * the stored state of the first entry whose tag matches, so the compare of a
 * successor with the state it may equal rarely waits for memory. */
#define KV_AHEAD 8

static inline __attribute__((always_inline)) void kv_fetch_slot(const kv_ctx *c, uint64_t h) {
    uint64_t k = (h >> 32) & c->mask;
    __builtin_prefetch(c->fingerprint ? (void *)&c->fp[k] : (void *)&c->table[k]);
}

static inline __attribute__((always_inline)) void kv_fetch_row(const kv_ctx *c, const kv_rec *rc) {
    if (c->fingerprint || !rc->kind) return;
    uint64_t k = (rc->hash >> 32) & c->mask, tag = rc->hash & ~0xFFFFFFFFull;
    for (int probes = 0; probes < 4; probes++) {
        uint64_t e = c->table[k];
        if (!e) return;
        if ((e & ~0xFFFFFFFFull) == tag) {
            __builtin_prefetch(c->arena + (size_t)((e & 0xFFFFFFFFull) - 1) * SB);
            return;
        }
        k = (k + 1) & c->mask;
    }
}

/* store the window's records in the single-threaded order, with its checks; stopping
 * within the window, take back the coverage counts of the states after the stop */
static int kv_store_window(kv_pool *P, kv_loop *L) {
    kv_ctx *c = P->c;
    kv_result *r = c->r;
    for (int64_t i = 0; i < P->count; i++) {
        int st = kv_before(c, (int)L->p->stop_first);
        if (st) { kv_uncount(P, i); return st; }
        if (c->head == L->level_end) { L->depth++; L->level_end = c->n; }
        kv_chunk *o = &P->chunk[i / P->per];
        int j = (int)(i % P->per);
        c->transitions += o->trans[j];
        for (int64_t x = j ? o->end[j - 1] : 0; x < o->end[j]; x++) {
            const kv_rec *rc = &o->rec[x];
            if (x + 2 * KV_AHEAD < o->nrec) kv_fetch_slot(c, o->rec[x + 2 * KV_AHEAD].hash);
            if (x + KV_AHEAD < o->nrec) kv_fetch_row(c, &o->rec[x + KV_AHEAD]);
            if (rc->viol) kv_found(c, rc->viol, c->head, rc->inst);
            if (!rc->kind) continue;
            int64_t idx = kv_insert_h(c, rc->w, rc->hash, c->head, rc->inst);
            if (idx == -2) return ST_NOMEM;
            if (idx == -1) continue;
            uint64_t bad = rc->bad;
            int err = rc->kind == 2;
            if (rc->kind == 3) {
                int64_t sv[NSLOTS];
                kv_decode(rc->w, sv);
                err = kv_inv_err(sv);
                if (!err) bad = kv_inv_bad(sv);
            }
            if (err) { r->err_kind = 2; r->err_state = idx; return ST_NONE; }
            if (bad) kv_found(c, bad, idx, -1);
        }
        if (o->err[j] < 0) return ST_NOMEM;
        if (o->err[j]) {
            r->err_kind = 1; r->err_state = c->head; r->err_inst = o->err[j] - 1;
            return ST_NONE;
        }
        c->head++;
        st = kv_tick(c, L, c->head, c->head < c->n, L->depth);
        if (st) {
            if (i + 1 < P->count) kv_uncount(P, i + 1);
            return st;
        }
    }
    return KV_GO;
}

static kv_pool *kv_pool_new(kv_ctx *c, int64_t nw, int64_t per, int64_t nchunk) {
    kv_pool *P = calloc(1, sizeof *P);
    if (!P) return NULL;
    P->c = c;
    P->nw = nw;
    P->per = per >= 1 && per <= KV_CHUNK ? per : KV_CHUNK;
    P->nchunk = nchunk;
    P->w = calloc((size_t)nw, sizeof(kv_ctx));
    P->wr = calloc((size_t)nw, sizeof(kv_result));
    P->cov = calloc((size_t)nw * (NINST + NKINDS), sizeof(int64_t));
    P->tid = calloc((size_t)nw, sizeof(pthread_t));
    P->arg = calloc((size_t)nw, sizeof *P->arg);
    if (!P->w || !P->wr || !P->cov || !P->tid || !P->arg) return P;  /* nw == 0: no workers */
    pthread_mutex_init(&P->mu, NULL);
    pthread_cond_init(&P->go, NULL);
    pthread_cond_init(&P->idle, NULL);
    for (int64_t i = 0; i < nw; i++) {
        kv_ctx *w = &P->w[i];
        w->r = &P->wr[i];
        w->cov_inst = i ? P->cov + i * (NINST + NKINDS) : c->cov_inst;
        w->cov_ev = i ? w->cov_inst + NINST : c->cov_ev;
        w->edge_cap = -1;
        w->shared = c;
        w->solo = nw == 1;
        P->arg[i].pool = P;
        P->arg[i].i = i;
        if (i && !pthread_create(&P->tid[i], NULL, kv_worker, &P->arg[i])) P->started++;
        else if (i) break;  /* fewer threads than asked: the search is the same */
    }
    return P;
}

static void kv_pool_free(kv_pool *P) {
    if (P->w && P->wr && P->cov && P->tid && P->arg) {
        pthread_mutex_lock(&P->mu);
        P->quit = 1;
        pthread_cond_broadcast(&P->go);
        pthread_mutex_unlock(&P->mu);
        for (int64_t i = 1; i <= P->started; i++) pthread_join(P->tid[i], NULL);
        for (int64_t i = 1; i <= P->started; i++)
            for (int k = 0; k < NINST + NKINDS; k++) {
                int64_t v = P->cov[i * (NINST + NKINDS) + k];
                if (k < NINST) P->c->cov_inst[k] += v;
                else P->c->cov_ev[k - NINST] += v;
            }
        pthread_mutex_destroy(&P->mu);
        pthread_cond_destroy(&P->go);
        pthread_cond_destroy(&P->idle);
    }
    for (int k = 0; k < KV_NCHUNK; k++) free(P->chunk[k].rec);
    free(P->w); free(P->wr); free(P->cov); free(P->tid); free(P->arg);
    free(P);
}

static int kv_workers(kv_ctx *c, kv_loop *L, int64_t nw) {
    kv_pool *P = kv_pool_new(c, nw, L->p->chunk, nw > 1 ? KV_NCHUNK : KV_SOLO_NCHUNK);
    if (!P) return ST_NOMEM;
    if (!P->w || !P->wr || !P->cov || !P->tid || !P->arg) { kv_pool_free(P); return ST_NOMEM; }
    int st = ST_NONE;
    while (c->head < c->n) {
        st = kv_before(c, (int)L->p->stop_first);  /* no window to expand for nothing */
        if (st) break;
        int64_t count = c->n - c->head;
        int64_t window = P->per * P->nchunk;
        kv_pool_expand(P, c->head, count < window ? count : window);
        st = kv_store_window(P, L);
        if (st != KV_GO) break;
        st = ST_NONE;
    }
    kv_pool_free(P);
    return st;
}

