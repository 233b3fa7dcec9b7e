/* Canonical representatives under request and page permutations: the algorithm of
 * kvspec/engines/canon.py (Canonicalizer.key) over an unpacked state, so that the
 * native and the Python search keep the same representative of every orbit. */
#define MAX_TIE_ORDERS 720
#define SIGW (NPV + 1)

static inline int64_t kv_rel(int64_t x, int r) { return x >= 0 ? (x == r ? -2 : -3) : x; }

static int kv_cmp_state(const int64_t *a, const int64_t *b) {
    for (int i = 0; i < NSLOTS; i++)
        if (a[i] != b[i]) return a[i] < b[i] ? -1 : 1;
    return 0;
}

#if PAGE_SYM
/* page p's column against page q's: its per-page values, then its rows of the grids */
static int kv_cmp_col(const int64_t *img, int p, int q) {
    for (int k = 0; k < NPV; k++) {
        int64_t a = img[PV_OFF[k] + p], b = img[PV_OFF[k] + q];
        if (a != b) return a < b ? -1 : 1;
    }
    for (int k = 0; k < NGV; k++)
        for (int r = 0; r < CR; r++) {
            int64_t a = img[GV_OFF[k] + p * CR + r], b = img[GV_OFF[k] + q * CR + r];
            if (a != b) return a < b ? -1 : 1;
        }
    return 0;
}
#endif

/* the image of s with the requests in `order` (old ids in their new positions),
 * then the pages sorted by their columns */
static void kv_image(const int64_t *s, const int *order, int64_t *out) {
    int rperm[CR];
    for (int n = 0; n < CR; n++) rperm[order[n]] = n;
    memcpy(out, s, sizeof(int64_t) * NSLOTS);
    for (int k = 0; k < NSC; k++) {
        int off = SC_OFF[k];
        if (SC_REF[k] && s[off] >= 0) out[off] = rperm[s[off]];
    }
    for (int k = 0; k < NRV; k++) {
        int off = RV_OFF[k];
        for (int r = 0; r < CR; r++) {
            int64_t x = s[off + r];
            out[off + rperm[r]] = (RV_REF[k] && x >= 0) ? rperm[x] : x;
        }
    }
    for (int k = 0; k < NPV; k++) {
        int off = PV_OFF[k];
        if (!PV_REF[k]) continue;
        for (int p = 0; p < CP; p++) {
            int64_t x = s[off + p];
            out[off + p] = x >= 0 ? rperm[x] : x;
        }
    }
    for (int k = 0; k < NGV; k++) {
        int off = GV_OFF[k];
        for (int p = 0; p < CP; p++)
            for (int r = 0; r < CR; r++) {
                int64_t x = s[off + p * CR + r];
                out[off + p * CR + rperm[r]] = (GV_REF[k] && x >= 0) ? rperm[x] : x;
            }
    }
#if PAGE_SYM
    int ranked[CP];
    for (int i = 0; i < CP; i++) {
        int x = i, j = i - 1;
        while (j >= 0 && kv_cmp_col(out, ranked[j], x) > 0) { ranked[j + 1] = ranked[j]; j--; }
        ranked[j + 1] = x;
    }
    int64_t img[NSLOTS];
    memcpy(img, out, sizeof img);
    for (int k = 0; k < NPV; k++)
        for (int n = 0; n < CP; n++) out[PV_OFF[k] + n] = img[PV_OFF[k] + ranked[n]];
    for (int k = 0; k < NGV; k++)
        for (int n = 0; n < CP; n++)
            memcpy(&out[GV_OFF[k] + n * CR], &img[GV_OFF[k] + ranked[n] * CR],
                   sizeof(int64_t) * CR);
#endif
}

#if REQ_SYM
static int kv_cmp_row(const int64_t *s, int a, int b) {
    for (int k = 0; k < NRV; k++) {
        int off = RV_OFF[k];
        int64_t x = RV_REF[k] ? kv_rel(s[off + a], a) : s[off + a];
        int64_t y = RV_REF[k] ? kv_rel(s[off + b], b) : s[off + b];
        if (x != y) return x < y ? -1 : 1;
    }
    return 0;
}

typedef struct kv_sig {
    int64_t cols[CP][SIGW];  /* the columns naming the request, relative to it, sorted */
    int n, width;
} kv_sig;

static int kv_cmp_tuple(const int64_t *a, const int64_t *b, int n) {
    for (int i = 0; i < n; i++)
        if (a[i] != b[i]) return a[i] < b[i] ? -1 : 1;
    return 0;
}

static int kv_cmp_sig(const int64_t *s, const kv_sig *sig, int a, int b) {
    int c = kv_cmp_row(s, a, b);
    if (c) return c;
    const kv_sig *x = &sig[a], *y = &sig[b];
    int m = x->n < y->n ? x->n : y->n;
    for (int i = 0; i < m; i++) {
        c = kv_cmp_tuple(x->cols[i], y->cols[i], x->width);
        if (c) return c;
    }
    if (x->n != y->n) return x->n < y->n ? -1 : 1;
    for (int k = 0; k < NSC; k++) {
        if (!SC_REF[k]) continue;
        int64_t u = kv_rel(s[SC_OFF[k]], a), v = kv_rel(s[SC_OFF[k]], b);
        if (u != v) return u < v ? -1 : 1;
    }
    return 0;
}

static void kv_signatures(const int64_t *s, kv_sig *sig) {
    int width = PAGE_SYM ? NPV : NPV + 1;
    for (int r = 0; r < CR; r++) { sig[r].n = 0; sig[r].width = width; }
    for (int p = 0; p < CP; p++) {
        int named[CR];
        memset(named, 0, sizeof named);
        for (int k = 0; k < NPV; k++) {
            int64_t x = s[PV_OFF[k] + p];
            if (PV_REF[k] && x >= 0) named[x] = 1;
        }
        for (int r = 0; r < CR; r++) {
            if (!named[r]) continue;
            int64_t *t = sig[r].cols[sig[r].n++];
            int i = 0;
            if (!PAGE_SYM) t[i++] = p;
            for (int k = 0; k < NPV; k++) {
                int64_t x = s[PV_OFF[k] + p];
                t[i++] = PV_REF[k] ? kv_rel(x, r) : x;
            }
        }
    }
    for (int r = 0; r < CR; r++) {  /* sort each request's columns */
        kv_sig *g = &sig[r];
        for (int i = 1; i < g->n; i++) {
            int64_t tmp[SIGW];
            memcpy(tmp, g->cols[i], sizeof tmp);
            int j = i - 1;
            while (j >= 0 && kv_cmp_tuple(g->cols[j], tmp, width) > 0) {
                memcpy(g->cols[j + 1], g->cols[j], sizeof tmp);
                j--;
            }
            memcpy(g->cols[j + 1], tmp, sizeof tmp);
        }
    }
}

static int kv_next_perm(int *a, int n) {
    int i = n - 2;
    while (i >= 0 && a[i] >= a[i + 1]) i--;
    if (i < 0) {  /* last permutation: back to the first */
        for (int l = 0, h = n - 1; l < h; l++, h--) { int t = a[l]; a[l] = a[h]; a[h] = t; }
        return 0;
    }
    int j = n - 1;
    while (a[j] <= a[i]) j--;
    int t = a[i]; a[i] = a[j]; a[j] = t;
    for (int l = i + 1, h = n - 1; l < h; l++, h--) { t = a[l]; a[l] = a[h]; a[h] = t; }
    return 1;
}
#endif

static void kv_canon(const int64_t *s, int64_t *out) {
    int order[CR];
    for (int r = 0; r < CR; r++) order[r] = r;
#if REQ_SYM
    int distinct = !SCALAR_REFS;
    for (int a = 0; a < CR && distinct; a++)
        for (int b = a + 1; b < CR; b++)
            if (kv_cmp_row(s, a, b) == 0) { distinct = 0; break; }
    if (distinct) {
        for (int i = 1; i < CR; i++) {
            int x = order[i], j = i - 1;
            while (j >= 0 && kv_cmp_row(s, order[j], x) > 0) { order[j + 1] = order[j]; j--; }
            order[j + 1] = x;
        }
        kv_image(s, order, out);
        return;
    }
    kv_sig sig[CR];
    kv_signatures(s, sig);
    for (int i = 1; i < CR; i++) {
        int x = order[i], j = i - 1;
        while (j >= 0 && kv_cmp_sig(s, sig, order[j], x) > 0) { order[j + 1] = order[j]; j--; }
        order[j + 1] = x;
    }
    int start[CR], len[CR], groups = 0;
    for (int i = 0; i < CR; i++) {
        if (groups && kv_cmp_sig(s, sig, order[start[groups - 1]], order[i]) == 0) {
            len[groups - 1]++;
        } else {
            start[groups] = i; len[groups] = 1; groups++;
        }
    }
    int64_t total = 1;
    for (int g = 0; g < groups && total <= MAX_TIE_ORDERS; g++)
        for (int k = 2; k <= len[g]; k++) total *= k;
    if (groups == CR || total > MAX_TIE_ORDERS) {
        kv_image(s, order, out);
        return;
    }
    int64_t cand[NSLOTS];
    int first = 1;
    for (;;) {
        kv_image(s, order, first ? out : cand);
        if (!first && kv_cmp_state(cand, out) < 0) memcpy(out, cand, sizeof cand);
        first = 0;
        int g = groups - 1;
        while (g >= 0 && !kv_next_perm(order + start[g], len[g])) g--;
        if (g < 0) break;
    }
#else
    kv_image(s, order, out);
#endif
}

static int kv_succ_full(kv_ctx *c, const int64_t *t, int64_t inst, uint64_t viol) {
    int64_t k[NSLOTS];
    uint64_t w[NW];
    kv_canon(t, k);
    memset(w, 0, sizeof w);
    kv_pack(k, w);
    return kv_succ(c, w, inst, viol);
}

/* the canonical form of an unpacked state (used to check the generated code) */
void kv_canon_state(const int64_t *s, int64_t *out) { kv_canon(s, out); }
