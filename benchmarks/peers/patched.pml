/* models/patched.py (PatchedPD, the fail-closed PD design) in Promela, with exactly
 * the state kvspec's explicit engine stores: the model's variables, the monitor
 * variables of the selected properties and their violation flags (monitor.pml).
 * One d_step per action instance; see README.md.
 *
 *   spin -DREQUESTS=3 -DPAGES=6 -a patched.pml && gcc -O2 -DSAFETY -DNOREDUCE -o pan pan.c
 */
#include "common.pml"

/* enum Phase */
#define NEW 0
#define QUEUED 1
#define BOOTSTRAP 2
#define TRANSFER 3
#define HELD 4
#define RUNNING 5
#define DECODED 6
#define DONE 7
/* enum Reason */
#define R_NONE 0
#define ABORT 1
#define LENGTH 2

byte phase[REQUESTS];                 /* Phase, init NEW */
byte need[REQUESTS];                  /* 0..max_need */
byte finished_reason[REQUESTS];       /* Reason, init NONE */
bool timed_out[REQUESTS];
byte sent[REQUESTS];                  /* 0..max_need */
byte owner[PAGES] = NONE;             /* request or NONE */
byte inflight[PAGES] = NONE;          /* request or NONE */
bool landed[PAGES];

#include "monitor.pml"

#define OWNS(r, p) (owner[p] == r)
#define OWNS_N(r, p) (owner[p] == r -> 1 : 0)
#define INFLIGHT_OF(r, p) (inflight[p] == r)
#define MINE_NOT_LANDED(r, p) (owner[p] == r && !landed[p])
#define FREE_IF_MINE(r, p) \
    if :: owner[p] == r -> EV_FREE(r, p); owner[p] = NONE; landed[p] = false \
       :: else -> skip fi
#define READ_IF_MINE(r, p) if :: owner[p] == r -> EV_READ(r, p) :: else -> skip fi

#define ARRIVE(r, n) \
    :: d_step { phase[r] == NEW -> need[r] = n; phase[r] = QUEUED }

#define ADMISSION(r) \
    :: d_step { phase[r] == QUEUED -> \
         if :: need[r] > PREFILL_CAPACITY -> \
                 finished_reason[r] = ABORT; phase[r] = DONE; EV_REJECT(r) \
            :: else -> phase[r] = BOOTSTRAP; EV_ADMIT(r) \
         fi }

#define PREALLOC(r, p) \
    :: d_step { phase[r] == BOOTSTRAP && finished_reason[r] == R_NONE && owner[p] == NONE -> \
         owner[p] = r; landed[p] = false; EV_ALLOC(r, p); \
         if :: SUM_P(OWNS_N, r) == need[r] -> phase[r] = TRANSFER :: else -> skip fi }

#define SEND_CHUNK(r, p) \
    :: d_step { phase[r] == TRANSFER && owner[p] == r && inflight[p] == NONE && !landed[p] \
                && sent[r] < need[r] -> \
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
    :: d_step { phase[r] == TRANSFER && sent[r] == need[r] && !OR_P(INFLIGHT_OF, r) \
                && !OR_P(MINE_NOT_LANDED, r) -> \
         phase[r] = RUNNING }

#define ABORT_(r) \
    :: d_step { phase[r] == TRANSFER || phase[r] == BOOTSTRAP -> \
         finished_reason[r] = ABORT; phase[r] = HELD; EV_ABORT(r) }

#define DRAIN_ACK(r, p) \
    :: d_step { phase[r] == HELD && inflight[p] == r -> inflight[p] = NONE; EV_DRAIN(r, p) }

#define TIMEOUT(r) \
    :: d_step { phase[r] == HELD && !timed_out[r] -> timed_out[r] = true; EV_TIMEOUT(r) }

#define RELEASE(r) \
    :: d_step { phase[r] == HELD && !OR_P(INFLIGHT_OF, r) -> \
         STMT_P(FREE_IF_MINE, r); phase[r] = DONE }

#define DECODE(r) \
    :: d_step { phase[r] == RUNNING -> \
         STMT_P(READ_IF_MINE, r); EV_DECODE(r); phase[r] = DECODED }

#define FINISH(r) \
    :: d_step { phase[r] == DECODED || phase[r] == RUNNING -> \
         STMT_P(FREE_IF_MINE, r); \
         if :: phase[r] == DECODED -> finished_reason[r] = LENGTH; EV_FINISH(r) \
            :: else -> finished_reason[r] = ABORT; EV_ABORT(r) \
         fi; \
         phase[r] = DONE }

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
    FOR_R(ABORT_)
    FOR_RP(DRAIN_ACK)
    FOR_R(TIMEOUT)
    FOR_R(RELEASE)
    FOR_R(DECODE)
    FOR_R(FINISH)
    od
}
