/* Shared part of the Promela peers of models/patched.py and models/buggy_pd.py:
 * the size parameters, the enumeration of action instances, and kvspec's property
 * library (kvspec/props/library.py) as monitor variables updated by events.
 *
 * Sizes are C-preprocessor parameters, e.g. spin -DREQUESTS=3 -DPAGES=6 -a patched.pml.
 * Properties: -DPROP_NDAR=0 (etc.) leaves a property out, exactly as
 * `kvspec verify --property ...` selects properties: the monitor variables only the
 * left-out properties read are then not stored, and its violation flag is not either.
 * -DSTOP_AT_VIOLATION turns a violation into a failing assertion (for counterexamples);
 * without it a violation only sets the property's flag, as kvspec does, and the search
 * goes on (for state counts).
 * See README.md for the correspondence with kvspec's state, slot by slot.
 */

#ifndef REQUESTS
#define REQUESTS 2
#endif
#ifndef PAGES
#define PAGES 4
#endif
#ifndef PREFILL_CAPACITY
#define PREFILL_CAPACITY 2
#endif
#ifndef MAX_NEED
#define MAX_NEED 3
#endif
#if REQUESTS < 1 || REQUESTS > 6
#error "REQUESTS must be 1..6"
#endif
#if PAGES < 1 || PAGES > 12
#error "PAGES must be 1..12"
#endif
#if MAX_NEED < 1 || MAX_NEED > 6
#error "MAX_NEED must be 1..6"
#endif

#ifndef PROP_NDAR
#define PROP_NDAR 1
#endif
#ifndef PROP_RIT
#define PROP_RIT 1
#endif
#ifndef PROP_NRBW
#define PROP_NRBW 1
#endif
#ifndef PROP_NRBD
#define PROP_NRBD 1
#endif

/* kvspec's encoding of "no request" (requests.optional = None) */
#define NONE 255
/* library.INFLIGHT_BOUND = 2 counted exactly; 3 = "more than 2, no longer counted" */
#define INFLIGHT_SATURATED 3

/* ---- enumeration of ids up to the maximum sizes ------------------------------------
 * FOR_R(M): M(0) M(1) ... M(REQUESTS-1)         (statement alternatives, no separator)
 * FOR_RP(M): M(r, p) for every request r, page p
 * FOR_RN(M): M(r, n) for every request r and n in 1..MAX_NEED
 * FOR_P(M):  M(0) ... M(PAGES-1)
 * STMT_P(M, r): M(r, 0); ...; M(r, PAGES-1); skip      (a statement sequence)
 * OR_P(M, r):  (false || M(r, 0) || ...)              (an expression)
 * SUM_P(M, r): (0 + M(r, 0) + ...)
 * STMT_R(M, p) / OR_R(M, p) / SUM_R(M, p): the same over requests, M(p, r)
 */
#if PAGES > 0
#define P_0(M) M(0)
#define RP_0(M, r) M(r, 0)
#define SP_0(M, r) M(r, 0);
#define OP_0(M, r) || M(r, 0)
#define AP_0(M, r) + M(r, 0)
#else
#define P_0(M)
#define RP_0(M, r)
#define SP_0(M, r)
#define OP_0(M, r)
#define AP_0(M, r)
#endif
#if PAGES > 1
#define P_1(M) M(1)
#define RP_1(M, r) M(r, 1)
#define SP_1(M, r) M(r, 1);
#define OP_1(M, r) || M(r, 1)
#define AP_1(M, r) + M(r, 1)
#else
#define P_1(M)
#define RP_1(M, r)
#define SP_1(M, r)
#define OP_1(M, r)
#define AP_1(M, r)
#endif
#if PAGES > 2
#define P_2(M) M(2)
#define RP_2(M, r) M(r, 2)
#define SP_2(M, r) M(r, 2);
#define OP_2(M, r) || M(r, 2)
#define AP_2(M, r) + M(r, 2)
#else
#define P_2(M)
#define RP_2(M, r)
#define SP_2(M, r)
#define OP_2(M, r)
#define AP_2(M, r)
#endif
#if PAGES > 3
#define P_3(M) M(3)
#define RP_3(M, r) M(r, 3)
#define SP_3(M, r) M(r, 3);
#define OP_3(M, r) || M(r, 3)
#define AP_3(M, r) + M(r, 3)
#else
#define P_3(M)
#define RP_3(M, r)
#define SP_3(M, r)
#define OP_3(M, r)
#define AP_3(M, r)
#endif
#if PAGES > 4
#define P_4(M) M(4)
#define RP_4(M, r) M(r, 4)
#define SP_4(M, r) M(r, 4);
#define OP_4(M, r) || M(r, 4)
#define AP_4(M, r) + M(r, 4)
#else
#define P_4(M)
#define RP_4(M, r)
#define SP_4(M, r)
#define OP_4(M, r)
#define AP_4(M, r)
#endif
#if PAGES > 5
#define P_5(M) M(5)
#define RP_5(M, r) M(r, 5)
#define SP_5(M, r) M(r, 5);
#define OP_5(M, r) || M(r, 5)
#define AP_5(M, r) + M(r, 5)
#else
#define P_5(M)
#define RP_5(M, r)
#define SP_5(M, r)
#define OP_5(M, r)
#define AP_5(M, r)
#endif
#if PAGES > 6
#define P_6(M) M(6)
#define RP_6(M, r) M(r, 6)
#define SP_6(M, r) M(r, 6);
#define OP_6(M, r) || M(r, 6)
#define AP_6(M, r) + M(r, 6)
#else
#define P_6(M)
#define RP_6(M, r)
#define SP_6(M, r)
#define OP_6(M, r)
#define AP_6(M, r)
#endif
#if PAGES > 7
#define P_7(M) M(7)
#define RP_7(M, r) M(r, 7)
#define SP_7(M, r) M(r, 7);
#define OP_7(M, r) || M(r, 7)
#define AP_7(M, r) + M(r, 7)
#else
#define P_7(M)
#define RP_7(M, r)
#define SP_7(M, r)
#define OP_7(M, r)
#define AP_7(M, r)
#endif
#if PAGES > 8
#define P_8(M) M(8)
#define RP_8(M, r) M(r, 8)
#define SP_8(M, r) M(r, 8);
#define OP_8(M, r) || M(r, 8)
#define AP_8(M, r) + M(r, 8)
#else
#define P_8(M)
#define RP_8(M, r)
#define SP_8(M, r)
#define OP_8(M, r)
#define AP_8(M, r)
#endif
#if PAGES > 9
#define P_9(M) M(9)
#define RP_9(M, r) M(r, 9)
#define SP_9(M, r) M(r, 9);
#define OP_9(M, r) || M(r, 9)
#define AP_9(M, r) + M(r, 9)
#else
#define P_9(M)
#define RP_9(M, r)
#define SP_9(M, r)
#define OP_9(M, r)
#define AP_9(M, r)
#endif
#if PAGES > 10
#define P_10(M) M(10)
#define RP_10(M, r) M(r, 10)
#define SP_10(M, r) M(r, 10);
#define OP_10(M, r) || M(r, 10)
#define AP_10(M, r) + M(r, 10)
#else
#define P_10(M)
#define RP_10(M, r)
#define SP_10(M, r)
#define OP_10(M, r)
#define AP_10(M, r)
#endif
#if PAGES > 11
#define P_11(M) M(11)
#define RP_11(M, r) M(r, 11)
#define SP_11(M, r) M(r, 11);
#define OP_11(M, r) || M(r, 11)
#define AP_11(M, r) + M(r, 11)
#else
#define P_11(M)
#define RP_11(M, r)
#define SP_11(M, r)
#define OP_11(M, r)
#define AP_11(M, r)
#endif

#define FOR_P(M) P_0(M) P_1(M) P_2(M) P_3(M) P_4(M) P_5(M) P_6(M) P_7(M) P_8(M) P_9(M) \
    P_10(M) P_11(M)
#define FOR_P_OF(M, r) RP_0(M, r) RP_1(M, r) RP_2(M, r) RP_3(M, r) RP_4(M, r) RP_5(M, r) \
    RP_6(M, r) RP_7(M, r) RP_8(M, r) RP_9(M, r) RP_10(M, r) RP_11(M, r)
#define STMT_P(M, r) SP_0(M, r) SP_1(M, r) SP_2(M, r) SP_3(M, r) SP_4(M, r) SP_5(M, r) \
    SP_6(M, r) SP_7(M, r) SP_8(M, r) SP_9(M, r) SP_10(M, r) SP_11(M, r) skip
#define OR_P(M, r) (false OP_0(M, r) OP_1(M, r) OP_2(M, r) OP_3(M, r) OP_4(M, r) \
    OP_5(M, r) OP_6(M, r) OP_7(M, r) OP_8(M, r) OP_9(M, r) OP_10(M, r) OP_11(M, r))
#define SUM_P(M, r) (0 AP_0(M, r) AP_1(M, r) AP_2(M, r) AP_3(M, r) AP_4(M, r) \
    AP_5(M, r) AP_6(M, r) AP_7(M, r) AP_8(M, r) AP_9(M, r) AP_10(M, r) AP_11(M, r))

#if REQUESTS > 0
#define R_0(M) M(0)
#define RQ_0(M, p) M(p, 0)
#define OR_0(M, p) || M(p, 0)
#define AR_0(M, p) + M(p, 0)
#define SR_0(M, p) M(p, 0);
#else
#define SR_0(M, p)
#define R_0(M)
#define RQ_0(M, p)
#define OR_0(M, p)
#define AR_0(M, p)
#endif
#if REQUESTS > 1
#define R_1(M) M(1)
#define RQ_1(M, p) M(p, 1)
#define OR_1(M, p) || M(p, 1)
#define AR_1(M, p) + M(p, 1)
#define SR_1(M, p) M(p, 1);
#else
#define SR_1(M, p)
#define R_1(M)
#define RQ_1(M, p)
#define OR_1(M, p)
#define AR_1(M, p)
#endif
#if REQUESTS > 2
#define R_2(M) M(2)
#define RQ_2(M, p) M(p, 2)
#define OR_2(M, p) || M(p, 2)
#define AR_2(M, p) + M(p, 2)
#define SR_2(M, p) M(p, 2);
#else
#define SR_2(M, p)
#define R_2(M)
#define RQ_2(M, p)
#define OR_2(M, p)
#define AR_2(M, p)
#endif
#if REQUESTS > 3
#define R_3(M) M(3)
#define RQ_3(M, p) M(p, 3)
#define OR_3(M, p) || M(p, 3)
#define AR_3(M, p) + M(p, 3)
#define SR_3(M, p) M(p, 3);
#else
#define SR_3(M, p)
#define R_3(M)
#define RQ_3(M, p)
#define OR_3(M, p)
#define AR_3(M, p)
#endif
#if REQUESTS > 4
#define R_4(M) M(4)
#define RQ_4(M, p) M(p, 4)
#define OR_4(M, p) || M(p, 4)
#define AR_4(M, p) + M(p, 4)
#define SR_4(M, p) M(p, 4);
#else
#define SR_4(M, p)
#define R_4(M)
#define RQ_4(M, p)
#define OR_4(M, p)
#define AR_4(M, p)
#endif
#if REQUESTS > 5
#define R_5(M) M(5)
#define RQ_5(M, p) M(p, 5)
#define OR_5(M, p) || M(p, 5)
#define AR_5(M, p) + M(p, 5)
#define SR_5(M, p) M(p, 5);
#else
#define SR_5(M, p)
#define R_5(M)
#define RQ_5(M, p)
#define OR_5(M, p)
#define AR_5(M, p)
#endif

#define FOR_R(M) R_0(M) R_1(M) R_2(M) R_3(M) R_4(M) R_5(M)
#define STMT_R(M, p) SR_0(M, p) SR_1(M, p) SR_2(M, p) SR_3(M, p) SR_4(M, p) SR_5(M, p) skip
#define OR_R(M, p) (false OR_0(M, p) OR_1(M, p) OR_2(M, p) OR_3(M, p) OR_4(M, p) OR_5(M, p))
#define SUM_R(M, p) (0 AR_0(M, p) AR_1(M, p) AR_2(M, p) AR_3(M, p) AR_4(M, p) AR_5(M, p))

/* every (request, page) pair and every (request, n) pair with 1 <= n <= MAX_NEED */
#define FOR_RP(M) RP_ROW_0(M) RP_ROW_1(M) RP_ROW_2(M) RP_ROW_3(M) RP_ROW_4(M) RP_ROW_5(M)
#if REQUESTS > 0
#define RP_ROW_0(M) FOR_P_OF(M, 0)
#else
#define RP_ROW_0(M)
#endif
#if REQUESTS > 1
#define RP_ROW_1(M) FOR_P_OF(M, 1)
#else
#define RP_ROW_1(M)
#endif
#if REQUESTS > 2
#define RP_ROW_2(M) FOR_P_OF(M, 2)
#else
#define RP_ROW_2(M)
#endif
#if REQUESTS > 3
#define RP_ROW_3(M) FOR_P_OF(M, 3)
#else
#define RP_ROW_3(M)
#endif
#if REQUESTS > 4
#define RP_ROW_4(M) FOR_P_OF(M, 4)
#else
#define RP_ROW_4(M)
#endif
#if REQUESTS > 5
#define RP_ROW_5(M) FOR_P_OF(M, 5)
#else
#define RP_ROW_5(M)
#endif

#if MAX_NEED > 0
#define N_1(M, r) M(r, 1)
#else
#define N_1(M, r)
#endif
#if MAX_NEED > 1
#define N_2(M, r) M(r, 2)
#else
#define N_2(M, r)
#endif
#if MAX_NEED > 2
#define N_3(M, r) M(r, 3)
#else
#define N_3(M, r)
#endif
#if MAX_NEED > 3
#define N_4(M, r) M(r, 4)
#else
#define N_4(M, r)
#endif
#if MAX_NEED > 4
#define N_5(M, r) M(r, 5)
#else
#define N_5(M, r)
#endif
#if MAX_NEED > 5
#define N_6(M, r) M(r, 6)
#else
#define N_6(M, r)
#endif
#define FOR_N_OF(M, r) N_1(M, r) N_2(M, r) N_3(M, r) N_4(M, r) N_5(M, r) N_6(M, r)
#if REQUESTS > 0
#define RN_ROW_0(M) FOR_N_OF(M, 0)
#else
#define RN_ROW_0(M)
#endif
#if REQUESTS > 1
#define RN_ROW_1(M) FOR_N_OF(M, 1)
#else
#define RN_ROW_1(M)
#endif
#if REQUESTS > 2
#define RN_ROW_2(M) FOR_N_OF(M, 2)
#else
#define RN_ROW_2(M)
#endif
#if REQUESTS > 3
#define RN_ROW_3(M) FOR_N_OF(M, 3)
#else
#define RN_ROW_3(M)
#endif
#if REQUESTS > 4
#define RN_ROW_4(M) FOR_N_OF(M, 4)
#else
#define RN_ROW_4(M)
#endif
#if REQUESTS > 5
#define RN_ROW_5(M) FOR_N_OF(M, 5)
#else
#define RN_ROW_5(M)
#endif
#define FOR_RN(M) RN_ROW_0(M) RN_ROW_1(M) RN_ROW_2(M) RN_ROW_3(M) RN_ROW_4(M) RN_ROW_5(M)
