/* models/buggy_pd.py (BuggyPD, SGLang PD disaggregation before the admission fix) in
 * Promela, with exactly the state kvspec's explicit engine stores: the model's
 * variables, the monitor variables of the selected properties and their violation
 * flags (monitor.pml). One d_step per action instance; see README.md.
 *
 *   spin -DREQUESTS=3 -DPAGES=6 -a buggy_pd.pml && gcc -O2 -DSAFETY -DNOREDUCE -o pan pan.c
 *   counterexample: add -DSTOP_AT_VIOLATION (and -DPROP_... to pick a property) and
 *   compile pan with -DBFS for the shortest trail
 */
#include "common.pml"

/* enum Phase */
#define NEW 0
#define QUEUED 1
#define BOOTSTRAP 2
#define TRANSFER 3
#define RUNNING 4
#define DECODED 5
#define DONE 6
/* enum Reason */
#define R_NONE 0
#define ABORT 1
#define LENGTH 2

byte phase[REQUESTS];                 /* Phase, init NEW */
byte need[REQUESTS];                  /* 0..max_need: decode's view of the prompt */
bool to_finish[REQUESTS];             /* set by set_finish_with_abort */
byte finished_reason[REQUESTS];       /* Reason, init NONE */
bool stub[REQUESTS];                  /* prompt swapped for [0] */
byte sent[REQUESTS];                  /* 0..max_need */
byte owner[PAGES] = NONE;             /* request or NONE */
byte inflight[PAGES] = NONE;          /* request or NONE */
bool landed[PAGES];

#include "monitor.pml"

#define OWNS_N(r, p) (owner[p] == r -> 1 : 0)
#define INFLIGHT_OF(r, p) (inflight[p] == r)
#define PREFILL_PAGES(r) (stub[r] -> 1 : need[r])
#define FREE_IF_MINE(r, p) \
    if :: owner[p] == r -> EV_FREE(r, p); owner[p] = NONE; landed[p] = false \
       :: else -> skip fi
#define READ_IF_MINE(r, p) if :: owner[p] == r -> EV_READ(r, p) :: else -> skip fi

#define ARRIVE(r, n) \
    :: d_step { phase[r] == NEW -> need[r] = n; phase[r] = QUEUED }

#define ADMISSION(r) \
    :: d_step { phase[r] == QUEUED -> \
         if :: need[r] > PREFILL_CAPACITY -> to_finish[r] = true; stub[r] = true; EV_REJECT(r) \
            :: else -> EV_ADMIT(r) \
         fi; \
         phase[r] = BOOTSTRAP }

#define PREALLOC(r, p) \
    :: d_step { phase[r] == BOOTSTRAP && finished_reason[r] == R_NONE && owner[p] == NONE \
                && inflight[p] == NONE -> \
         owner[p] = r; landed[p] = false; EV_ALLOC(r, p); \
         if :: SUM_P(OWNS_N, r) == need[r] -> phase[r] = TRANSFER :: else -> skip fi }

#define SEND_CHUNK(r, p) \
    :: d_step { phase[r] == TRANSFER && owner[p] == r && inflight[p] == NONE && !landed[p] \
                && sent[r] < PREFILL_PAGES(r) -> \
         sent[r] = sent[r] + 1; inflight[p] = r; EV_POST_WRITE(r, p) }

/* w = inflight[p], written out over the requests (pan's BFS mode allows no hidden
 * temporaries); after the matching branch inflight[p] is NONE, so exactly one runs */
#define LAND_BY(p, w) \
    if :: inflight[p] == w -> \
            inflight[p] = NONE; landed[p] = (owner[p] == w); EV_LAND_WRITE(w, p) \
       :: else -> skip fi
#define LAND(p) \
    :: d_step { inflight[p] != NONE -> STMT_R(LAND_BY, p) }

#define TRANSFER_SUCCESS(r) \
    :: d_step { phase[r] == TRANSFER && sent[r] == PREFILL_PAGES(r) \
                && !OR_P(INFLIGHT_OF, r) -> \
         phase[r] = RUNNING }

#define DECODE(r) \
    :: d_step { phase[r] == RUNNING -> \
         STMT_P(READ_IF_MINE, r); EV_DECODE(r); phase[r] = DECODED }

#define FINISH(r) \
    :: d_step { phase[r] == DECODED -> \
         STMT_P(FREE_IF_MINE, r); finished_reason[r] = LENGTH; phase[r] = DONE; \
         EV_FINISH(r) }

/* one process, always at the loop head between steps: its program counter is the
 * same in every state, so the stored states are exactly kvspec's */
active proctype lifecycle()
{
end:
    do
    FOR_RN(ARRIVE)
    FOR_R(ADMISSION)
    FOR_RP(PREALLOC)
    FOR_RP(SEND_CHUNK)
    FOR_P(LAND)
    FOR_R(TRANSFER_SUCCESS)
    FOR_R(DECODE)
    FOR_R(FINISH)
    od
}
