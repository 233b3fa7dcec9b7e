/* kvspec's property library (kvspec/props/library.py) in Promela: the monitor
 * variables, the checks (run on the monitor state before the event's updates) and the
 * updates, one macro per event kind. Include after common.pml.
 *
 * kvspec stores a monitor variable only when a selected property reads it (NEEDS) and
 * an event the model emits can move it away from its initial value (ESCAPES); both
 * shipped models emit every event kind, so only the property selection matters here.
 * Each selected property also stores one violation flag (the "violated:<name>" slot).
 */

#define STORE_REJECTED (PROP_NDAR || PROP_RIT)
#define STORE_PAGE_OWNER (PROP_NRBW || PROP_NRBD)
#define STORE_PAGE_WRITTEN (PROP_NRBW)
#define STORE_INFLIGHT_BY (PROP_NRBW || PROP_NRBD)

#if STORE_REJECTED
bool rejected[REQUESTS];                      /* rejected[r] */
#endif
#if STORE_PAGE_OWNER
byte page_owner[PAGES] = NONE;                    /* request or NONE */
#endif
#if STORE_PAGE_WRITTEN
byte page_written[PAGES] = NONE;                    /* request or NONE */
#endif
#if STORE_INFLIGHT_BY
byte page_inflight_by[PAGES * REQUESTS];      /* [p * REQUESTS + r], 0..3 */
#endif
#if PROP_NDAR
bool violated_ndar;                           /* violated:no-decode-after-rejection */
#endif
#if PROP_RIT
bool violated_rit;                            /* violated:rejection-is-terminal */
#endif
#if PROP_NRBW
bool violated_nrbw;                           /* violated:no-read-beyond-written */
#endif
#if PROP_NRBD
bool violated_nrbd;                           /* violated:no-reuse-before-drain */
#endif

#define IB(p, r) page_inflight_by[(p) * REQUESTS + (r)]

/* a violation sets the property's flag (kvspec's W[flag] = True); with
 * STOP_AT_VIOLATION it also fails an assertion, so that pan reports the trail */
#ifdef STOP_AT_VIOLATION
#define VIOLATE(flag) flag = true; assert(false)
#else
#define VIOLATE(flag) flag = true
#endif

/* ---- checks ---------------------------------------------------------------------- */
#if PROP_RIT
#define CHK_RIT(r) if :: rejected[r] -> VIOLATE(violated_rit) :: else -> skip fi
#else
#define CHK_RIT(r) skip
#endif
#if PROP_NDAR
#define CHK_NDAR(r) if :: rejected[r] -> VIOLATE(violated_ndar) :: else -> skip fi
#else
#define CHK_NDAR(r) skip
#endif

#define WRITING(p, w) (IB(p, w) > 0)
#define WRITING_N(p, w) (IB(p, w) > 0 -> 1 : 0)
#if PROP_NRBD
/* alloc(r, p): more requests with a write in flight into p than r itself */
#define CHK_NRBD_ALLOC(r, p) \
    if :: SUM_R(WRITING_N, p) > WRITING_N(p, r) -> VIOLATE(violated_nrbd) \
       :: else -> skip fi
/* land_write(r, p): p is not (or no longer) r's */
#define CHK_NRBD_LAND(r, p) \
    if :: page_owner[p] != r -> VIOLATE(violated_nrbd) :: else -> skip fi
#else
#define CHK_NRBD_ALLOC(r, p) skip
#define CHK_NRBD_LAND(r, p) skip
#endif
#if PROP_NRBW
/* read(r, p): p not r's, or a write in flight, or not last written by r since its
 * allocation (page_written is NONE then, and NONE != r) */
#define CHK_NRBW_READ(r, p) \
    if :: page_owner[p] != r || OR_R(WRITING, p) || page_written[p] != r -> \
            VIOLATE(violated_nrbw) \
       :: else -> skip fi
#else
#define CHK_NRBW_READ(r, p) skip
#endif

/* ---- updates --------------------------------------------------------------------- */
#if STORE_REJECTED
#define UPD_REJECT(r) rejected[r] = true
#else
#define UPD_REJECT(r) skip
#endif
#if STORE_PAGE_OWNER
#define UPD_OWNER(r, p) page_owner[p] = r
#define UPD_FREE(p) page_owner[p] = NONE
#else
#define UPD_OWNER(r, p) skip
#define UPD_FREE(p) skip
#endif
#if STORE_PAGE_WRITTEN
#define UPD_WRITTEN_ALLOC(p) page_written[p] = NONE
#define UPD_WRITTEN_LAND(r, p) page_written[p] = r
#else
#define UPD_WRITTEN_ALLOC(p) skip
#define UPD_WRITTEN_LAND(r, p) skip
#endif
#if STORE_INFLIGHT_BY
#define UPD_POST(r, p) \
    if :: IB(p, r) < INFLIGHT_SATURATED -> IB(p, r) = IB(p, r) + 1 :: else -> skip fi
#define UPD_DONE(r, p) \
    if :: IB(p, r) > 0 && IB(p, r) < INFLIGHT_SATURATED -> IB(p, r) = IB(p, r) - 1 \
       :: else -> skip fi
#else
#define UPD_POST(r, p) skip
#define UPD_DONE(r, p) skip
#endif

/* ---- events: checks first, then updates (library.handlers) ------------------------- */
#define EV_ADMIT(r) skip
#define EV_REJECT(r) UPD_REJECT(r)
#define EV_ALLOC(r, p) CHK_RIT(r); CHK_NRBD_ALLOC(r, p); UPD_OWNER(r, p); UPD_WRITTEN_ALLOC(p)
#define EV_POST_WRITE(r, p) CHK_RIT(r); UPD_POST(r, p)
#define EV_LAND_WRITE(r, p) CHK_NRBD_LAND(r, p); UPD_WRITTEN_LAND(r, p); UPD_DONE(r, p)
#define EV_DRAIN(r, p) UPD_DONE(r, p)
#define EV_READ(r, p) CHK_NDAR(r); CHK_RIT(r); CHK_NRBW_READ(r, p)
#define EV_DECODE(r) CHK_NDAR(r); CHK_RIT(r)
#define EV_FREE(r, p) UPD_FREE(p)
#define EV_ABORT(r) skip
#define EV_TIMEOUT(r) skip
#define EV_FINISH(r) skip
