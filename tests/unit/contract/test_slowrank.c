/* slowrank: the shared slow-rank rule on synchronised windows — every rank's wall is equal,
 * the straggler shows as compute/host excess matched by the others' wait, a slow link as
 * transfer excess — with the split measured or inferred from the ranks' communication, the
 * fail-slow device hidden by host time, clean runs that flag nobody, the job-wide cost and
 * the unsynchronised fallback. */
#include <setjmp.h>
#include <stdarg.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "contract/slowrank.h"

#define R 16
#define S 60
#define MS 1000000ull
static struct slowrank_sample smp[R][S];
static struct slowrank_in in[R];

enum kind { NONE, COMPUTE, HOST, LINK };

/* A synchronised job: compute 12 ms, transfer 2 ms, host 0.3 ms per step, with deterministic
 * noise of up to 4 * noise ns on compute and host. The slow rank from step `from` adds `add`
 * to its compute/host (the others wait that long in the collective) or its transfer. */
static void fill_sync_as(int slow, int from, enum kind k, uint64_t add, uint64_t noise, enum datamsg_split how)
{
    for (int r = 0; r < R; r++) {
        in[r] = (struct slowrank_in){ "h", r, 100 + r, 0, smp[r], S };
        for (int i = 0; i < S; i++) {
            uint64_t n = noise * (uint64_t)((r * 7 + i * 3) % 5);
            bool on = k != NONE && i + 1 >= from;
            struct slowrank_sample x = { .step = i + 1, .compute = 12 * MS + n, .host = 300000 + n / 2,
                                         .transfer = 2 * MS };
            if (on && r == slow) {
                if (k == COMPUTE)
                    x.compute += add;
                else if (k == HOST)
                    x.host += add;
                else
                    x.transfer += add;
            } else if (on && k != LINK) {
                x.wait = add; /* the others wait for the straggler */
            }
            x.wait += 4 * noise - n; /* whoever is noisiest waits least */
            x.comm = x.wait + x.transfer;
            /* everybody's step ends with the collective; a slow link ends later only for itself */
            x.wall = 12 * MS + 4 * noise + 300000 + 2 * MS + (on && (k != LINK || r == slow) ? add : 0);
            x.split = how;
            if (how != DATAMSG_SPLIT_MEASURED) { /* no Hccl records: the communication is all we know */
                x.wait = 0;
                x.transfer = x.comm;
            }
            smp[r][i] = x;
        }
    }
}

static void fill_sync(int slow, int from, enum kind k, uint64_t add, uint64_t noise)
{
    fill_sync_as(slow, from, k, add, noise, DATAMSG_SPLIT_MEASURED);
}

static void test_sync_causes(void **state)
{
    (void)state;
    struct slowrank_rule rule = SLOWRANK_RULE_DEFAULT;
    struct slowrank_result res;
    const enum kind kinds[] = { COMPUTE, HOST, LINK };
    const enum slowrank_cause want[] = { SLOWRANK_COMPUTE, SLOWRANK_HOST, SLOWRANK_COMMUNICATION };
    /* the same job with the split measured (Hccl records) and without (the wait inferred) */
    for (int m = 0; m < 2; m++) {
        enum datamsg_split how = m ? DATAMSG_SPLIT_NONE : DATAMSG_SPLIT_MEASURED;
        for (int i = 0; i < 3; i++) {
            fill_sync_as(5, 30, kinds[i], 2400000, 20000, how);
            assert_int_equal(slowrank_merge(in, R, &rule, &res), 0);
            assert_int_equal(res.nslow, 1);
            assert_int_equal(in[res.slow[0].rank_index].rank, 5);
            assert_int_equal(res.slow[0].since_step, 30);
            assert_int_equal(res.slow[0].last_step, S);
            assert_int_equal(res.slow[0].cause, want[i]);
            /* 2.4 ms is above 10 % of the step's 14.3 ms of work: it slows the job now */
            assert_int_equal(res.slow[0].severity, SLOWRANK_STRAGGLER);
            /* the walls are equal: the wall ratio alone could never name it */
            if (kinds[i] != LINK)
                assert_true(res.slow[0].ratio < 1.01);
            /* the others wait 2.4 ms per step on it (a slow link costs its own 2.4 ms here) */
            assert_true(res.slow[0].cost_ms > 2.3 && res.slow[0].cost_ms < 2.5);
            assert_true(res.slow[0].cost_share > 2.3 / 16.8 && res.slow[0].cost_share < 2.5 / 14.3);
            assert_int_equal(res.slow[0].cost_last_step, S);
            /* inferred: every judged sample but the slow link's, whose own step is longer by its
             * extra communication step after step (it did not wait: from its second slow
             * step on it keeps its communication unsplit) */
            if (m && kinds[i] == LINK) {
                assert_int_equal(res.slow[0].split, DATAMSG_SPLIT_NONE);
                assert_int_equal(res.split[DATAMSG_SPLIT_NONE], S - 30);
                assert_int_equal(res.split[DATAMSG_SPLIT_INFERRED], R * S - (S - 30));
            } else {
                assert_int_equal(res.slow[0].split, how == DATAMSG_SPLIT_NONE ? DATAMSG_SPLIT_INFERRED : how);
                assert_int_equal(res.split[how == DATAMSG_SPLIT_NONE ? DATAMSG_SPLIT_INFERRED : how], R * S);
            }
            slowrank_result_fini(&res);
        }
    }
    /* on a loaded machine the others woke late: they wait only 0.9 ms for its 2.4 ms, and its
     * own step reads 1 ms longer than theirs; what it costs them is still their wait */
    fill_sync(5, 30, COMPUTE, 2400000, 0);
    for (int r = 0; r < R; r++)
        for (int i = 29; i < S; i++) {
            if (r == 5) {
                smp[r][i].wall += 1000000;
            } else {
                smp[r][i].wait = 900000;
                smp[r][i].comm = smp[r][i].wait + smp[r][i].transfer;
            }
        }
    assert_int_equal(slowrank_merge(in, R, &rule, &res), 0);
    assert_int_equal(res.nslow, 1);
    assert_int_equal(in[res.slow[0].rank_index].rank, 5);
    assert_true(res.slow[0].cost_ms > 0.85 && res.slow[0].cost_ms < 0.95);
    slowrank_result_fini(&res);
    /* the newest two steps not reported by rank 0 yet: judged, but not costed */
    fill_sync(5, 30, COMPUTE, 2400000, 20000);
    in[0].n = S - 2;
    assert_int_equal(slowrank_merge(in, R, &rule, &res), 0);
    assert_int_equal(res.nslow, 1);
    assert_int_equal(res.slow[0].last_step, S);
    assert_int_equal(res.slow[0].cost_last_step, S - 2);
    slowrank_result_fini(&res);
}

static void test_sync_clean_and_blips(void **state)
{
    (void)state;
    struct slowrank_rule rule = SLOWRANK_RULE_DEFAULT;
    struct slowrank_result res;
    fill_sync(-1, 0, NONE, 0, 100000);
    assert_int_equal(slowrank_merge(in, R, &rule, &res), 0);
    assert_int_equal(res.nslow, 0);
    assert_int_equal(res.judged_steps, S);
    slowrank_result_fini(&res);
    /* a compute excess the others do not wait for is not the synchronised signature (and
     * below the wall rule): nobody */
    fill_sync(-1, 0, NONE, 0, 0);
    for (int i = 40; i < S; i++)
        smp[3][i].compute += 2400000;
    assert_int_equal(slowrank_merge(in, R, &rule, &res), 0);
    assert_int_equal(res.nslow, 0);
    slowrank_result_fini(&res);
    /* two slow steps at the end: below min_steps */
    fill_sync(7, S - 1, COMPUTE, 3000000, 0);
    assert_int_equal(slowrank_merge(in, R, &rule, &res), 0);
    assert_int_equal(res.nslow, 0);
    slowrank_result_fini(&res);
}

/* No split and no synchronisation: the wall rule, as before. */
static void test_unsync_wall(void **state)
{
    (void)state;
    struct slowrank_rule rule = SLOWRANK_RULE_DEFAULT;
    struct slowrank_result res;
    fill_sync(-1, 0, NONE, 0, 0);
    for (int r = 0; r < R; r++)
        for (int i = 0; i < S; i++) {
            smp[r][i].wait = 0;
            smp[r][i].transfer = 0; /* an older daemon: comm only */
            smp[r][i].split = DATAMSG_SPLIT_NONE;
            smp[r][i].comm = 2 * MS;
            smp[r][i].wall = 14300000;
            if (r == 9 && i + 1 >= 50) {
                smp[r][i].comm += 4 * MS;
                smp[r][i].wall += 4 * MS;
            }
        }
    assert_int_equal(slowrank_merge(in, R, &rule, &res), 0);
    assert_int_equal(res.nslow, 1);
    assert_int_equal(in[res.slow[0].rank_index].rank, 9);
    assert_int_equal(res.slow[0].cause, SLOWRANK_COMMUNICATION);
    assert_int_equal(res.slow[0].since_step, 50);
    assert_true(res.slow[0].ratio > 1.2);
    assert_true(res.slow[0].cost_ms > 3.9 && res.slow[0].cost_ms < 4.1);
    slowrank_result_fini(&res);
    assert_int_equal(slowrank_merge(NULL, 1, &rule, &res), -EINVAL);
    assert_int_equal(slowrank_merge(NULL, 0, &rule, &res), 0);
    assert_int_equal(res.judged_steps, 0);
    assert_int_equal(res.first_step, -1);
    slowrank_result_fini(&res);
}

/* ---- a synchronised job step by step: the ranks start together (paced: on one clock's
 * tick), compute, arrive at the all-reduce at different times (jitter), leave it together
 * after the last arrival plus the transfer, and finish the step; paced ranks then idle on the
 * host until the next tick. Deterministic pseudo-random noise. */
#define JR 8
#define JS 200
static struct slowrank_sample jsmp[JR][JS];
static struct slowrank_in jin[JR];
static uint64_t jrng;

static double jrand(void) /* [0, 1) */
{
    jrng ^= jrng << 13;
    jrng ^= jrng >> 7;
    jrng ^= jrng << 17;
    return (double)(jrng >> 11) / 9007199254740992.0;
}

struct jobspec {
    double comp_ms, xfer_ms, period_ms; /* period 0: unpaced */
    double comp_noise, jitter_ms;       /* compute x (1 +- comp_noise), arrival + [0, jitter) */
    double start_ms;                    /* each step starts [0, start_ms) late (the host's jitter:
                                           an early start waits longer in a longer step) */
    int slow, from;
    enum kind kind;
    double factor;
    enum datamsg_split how;
};

/* Returns the simulator's ground truth: the mean over steps >= from of the median rank's
 * wait less the slow rank's. */
static double fill_job(const struct jobspec *j, uint64_t seed)
{
    double truth = 0, t0 = 0, start[JR];
    int nt = 0;
    jrng = seed;
    for (int r = 0; r < JR; r++)
        start[r] = 0;
    for (int i = 0; i < JS; i++) {
        double arrive[JR], comp[JR], xfer[JR], last = 0;
        for (int r = 0; r < JR; r++) {
            bool slow = r == j->slow && i + 1 >= j->from;
            start[r] += j->start_ms * jrand();
            comp[r] = j->comp_ms * (1 + j->comp_noise * (2 * jrand() - 1)) * (slow && j->kind == COMPUTE ? j->factor : 1);
            xfer[r] = j->xfer_ms * (slow && j->kind == LINK ? j->factor : 1);
            arrive[r] = start[r] + comp[r] + j->jitter_ms * jrand() +
                        (slow && j->kind == HOST ? (j->factor - 1) * j->comp_ms : 0);
            if (arrive[r] > last)
                last = arrive[r];
        }
        double w[JR], next = last;
        for (int r = 0; r < JR; r++) {
            double wait = last - arrive[r], end = last + xfer[r];
            /* paced: every rank's step ends on the next tick; unpaced: when it leaves the
             * collective, and the next starts there */
            double wall = j->period_ms > 0 && t0 + j->period_ms > end ? t0 + j->period_ms - start[r] : end - start[r];
            if (end > next)
                next = end;
            struct slowrank_sample x = { .step = i + 1, .wall = (uint64_t)(wall * 1e6), .compute = (uint64_t)(comp[r] * 1e6),
                                         .comm = (uint64_t)((wait + xfer[r]) * 1e6), .split = j->how };
            x.host = x.wall - x.compute - x.comm;
            x.wait = j->how == DATAMSG_SPLIT_MEASURED ? (uint64_t)(wait * 1e6) : 0;
            x.transfer = x.comm - x.wait;
            jsmp[r][i] = x;
            w[r] = wait;
            start[r] = j->period_ms > 0 && t0 + j->period_ms > end ? t0 + j->period_ms : end;
        }
        t0 = j->period_ms > 0 && t0 + j->period_ms > next ? t0 + j->period_ms : next;
        if (j->slow >= 0 && i + 1 >= j->from) {
            double o[JR], ws = w[j->slow];
            memcpy(o, w, sizeof(o));
            for (int a = 1; a < JR; a++) /* insertion sort: the median of 8 */
                for (int b = a; b > 0 && o[b] < o[b - 1]; b--) {
                    double t = o[b];
                    o[b] = o[b - 1];
                    o[b - 1] = t;
                }
            truth += (o[JR / 2 - 1] + o[JR / 2]) / 2 - ws;
            nt++;
        }
    }
    for (int r = 0; r < JR; r++)
        jin[r] = (struct slowrank_in){ "h", r, 100 + r, 0, jsmp[r], JS };
    return nt ? truth / nt : 0;
}

/* The FAQ's default mode on a host-bound job: 200 ms steps (5 per second), 12 ms of compute,
 * one device 20 % slower from step 30. Its 2.4 ms hide in the step's host time (every wall is
 * 200 ms, and 2.4 ms is far below 10 % of the step), yet the others wait them out in every
 * all-reduce: a fail-slow device, named with its small cost. */
static void test_failslow_hidden_by_host(void **state)
{
    (void)state;
    struct slowrank_rule rule = SLOWRANK_RULE_DEFAULT;
    struct slowrank_result res;
    for (int m = 0; m < 2; m++) {
        struct jobspec j = { 12, 2, 200, 0.002, 0.3, 0.2, 5, 30, COMPUTE, 1.2,
                             m ? DATAMSG_SPLIT_MEASURED : DATAMSG_SPLIT_NONE };
        double truth = fill_job(&j, 42);
        assert_int_equal(slowrank_merge(jin, JR, &rule, &res), 0);
        assert_int_equal(res.nslow, 1);
        const struct slowrank_slow *sl = &res.slow[0];
        assert_int_equal(jin[sl->rank_index].rank, 5);
        assert_int_equal(sl->cause, SLOWRANK_COMPUTE);
        assert_int_equal(sl->severity, SLOWRANK_FAILSLOW);
        assert_int_equal(sl->split, m ? DATAMSG_SPLIT_MEASURED : DATAMSG_SPLIT_INFERRED);
        assert_true(sl->since_step >= 30 && sl->since_step <= 32);
        assert_true(fabs(sl->ratio - 1) < 0.01); /* the wall clock does not show it */
        assert_true(truth > 2 && fabs(sl->cost_ms - truth) < 0.1 * truth);
        assert_true(fabs(sl->cost_share - sl->cost_ms / 200) < 0.001);
        slowrank_result_fini(&res);
        /* the same 20 % on a compute-bound step (120 of 200 ms): it slows the job now */
        j.comp_ms = 120;
        j.xfer_ms = 20;
        truth = fill_job(&j, 43);
        assert_int_equal(slowrank_merge(jin, JR, &rule, &res), 0);
        assert_int_equal(res.nslow, 1);
        assert_int_equal(jin[res.slow[0].rank_index].rank, 5);
        assert_int_equal(res.slow[0].cause, SLOWRANK_COMPUTE);
        assert_int_equal(res.slow[0].severity, SLOWRANK_STRAGGLER);
        assert_true(fabs(res.slow[0].cost_ms - truth) < 0.05 * truth);
        slowrank_result_fini(&res);
    }
}

/* A slow link with the split measured: its transfer 30 % above the others' in a host-bound
 * step that does not wait for it (its own step is that much longer): fail-slow,
 * communication. Inferred, a transfer is the step's shortest communication for every rank,
 * so only the measured split can show it. */
static void test_failslow_link_measured(void **state)
{
    (void)state;
    struct slowrank_rule rule = SLOWRANK_RULE_DEFAULT;
    struct slowrank_result res;
    struct jobspec j = { 12, 2, 0, 0.002, 0.3, 0, 2, 50, LINK, 1.3, DATAMSG_SPLIT_MEASURED };
    fill_job(&j, 7);
    for (int r = 0; r < JR; r++) /* a host-bound step: 180 ms on the host after the collective */
        for (int i = 0; i < JS; i++) {
            jsmp[r][i].wall += 180000000;
            jsmp[r][i].host += 180000000;
        }
    assert_int_equal(slowrank_merge(jin, JR, &rule, &res), 0);
    assert_int_equal(res.nslow, 1);
    assert_int_equal(jin[res.slow[0].rank_index].rank, 2);
    assert_int_equal(res.slow[0].cause, SLOWRANK_COMMUNICATION);
    assert_int_equal(res.slow[0].severity, SLOWRANK_FAILSLOW);
    assert_true(res.slow[0].excess_ms[SLOWRANK_COMMUNICATION] > 0.55 && res.slow[0].excess_ms[SLOWRANK_COMMUNICATION] < 0.65);
    assert_true(res.slow[0].cost_ms > 0.5 && res.slow[0].cost_ms < 0.7);
    slowrank_result_fini(&res);
}

/* Clean synchronised runs, 200 steps, paced and unpaced, host- and compute-bound, split
 * measured or inferred, with compute noise, arrival jitter and ranks starting their steps up
 * to 1.5 ms late (an early start is a longer step with a longer wait, not a slow link):
 * nobody is named, and every wait is inferred where none is measured. */
static void test_clean_runs_flag_nobody(void **state)
{
    (void)state;
    struct slowrank_rule rule = SLOWRANK_RULE_DEFAULT;
    struct slowrank_result res;
    const double comp[] = { 12, 120 }, period[] = { 200, 0 };
    uint64_t seed = 1;
    for (int c = 0; c < 2; c++)
        for (int p = 0; p < 2; p++)
            for (int m = 0; m < 2; m++)
                for (int k = 0; k < 5; k++) {
                    struct jobspec j = { comp[c], comp[c] / 6, period[p], 0.02, 1.0, 1.5, -1, 0, NONE, 1,
                                         m ? DATAMSG_SPLIT_MEASURED : DATAMSG_SPLIT_NONE };
                    fill_job(&j, seed++);
                    assert_int_equal(slowrank_merge(jin, JR, &rule, &res), 0);
                    assert_int_equal(res.nslow, 0);
                    assert_int_equal(res.judged_steps, JS);
                    assert_int_equal(res.split[m ? DATAMSG_SPLIT_MEASURED : DATAMSG_SPLIT_INFERRED], JR * JS);
                    slowrank_result_fini(&res);
                }
}

/* Measured wins where both exist; the members of a collective are one job's ranks (another
 * job's longer communication is not a wait); a step with one communicating rank, or none,
 * has nothing to infer from. */
static void test_split_sources(void **state)
{
    (void)state;
    struct slowrank_rule rule = SLOWRANK_RULE_DEFAULT;
    struct slowrank_result res;
    /* ranks 0-3 measure their split, the others cannot */
    fill_sync_as(5, 30, COMPUTE, 2400000, 20000, DATAMSG_SPLIT_MEASURED);
    static struct slowrank_sample keep[4][S];
    for (int r = 0; r < 4; r++)
        memcpy(keep[r], smp[r], sizeof(keep[r]));
    fill_sync_as(5, 30, COMPUTE, 2400000, 20000, DATAMSG_SPLIT_NONE);
    for (int r = 0; r < 4; r++)
        memcpy(smp[r], keep[r], sizeof(keep[r]));
    assert_int_equal(slowrank_merge(in, R, &rule, &res), 0);
    assert_int_equal(res.split[DATAMSG_SPLIT_MEASURED], 4 * S);
    assert_int_equal(res.split[DATAMSG_SPLIT_INFERRED], (R - 4) * S);
    assert_int_equal(res.nslow, 1);
    assert_int_equal(in[res.slow[0].rank_index].rank, 5);
    assert_int_equal(res.slow[0].split, DATAMSG_SPLIT_INFERRED);
    assert_true(res.slow[0].cost_ms > 2.3 && res.slow[0].cost_ms < 2.5);
    slowrank_result_fini(&res);
    /* a measured wait of 1 ms more than the communication allows is no split at all */
    smp[0][3].wait = smp[0][3].comm + 1000000;
    assert_int_equal(slowrank_merge(in, R, &rule, &res), 0);
    assert_int_equal(res.split[DATAMSG_SPLIT_MEASURED], 4 * S - 1);
    slowrank_result_fini(&res);

    /* two jobs in one view, steps numbered alike: job 1's ranks all spend 10 ms in their
     * collective, job 0's 2 ms; neither waits for the other */
    fill_sync_as(-1, 0, NONE, 0, 0, DATAMSG_SPLIT_NONE);
    for (int r = R / 2; r < R; r++) {
        in[r].job = 1;
        for (int i = 0; i < S; i++) {
            smp[r][i].comm = smp[r][i].transfer = 10 * MS;
            smp[r][i].wall += 8 * MS;
        }
    }
    assert_int_equal(slowrank_merge(in, R, &rule, &res), 0);
    assert_int_equal(res.split[DATAMSG_SPLIT_INFERRED], R * S);
    assert_int_equal(res.nslow, 0);
    slowrank_result_fini(&res);

    /* nothing to infer from: one rank communicates, or none */
    fill_sync_as(-1, 0, NONE, 0, 0, DATAMSG_SPLIT_NONE);
    for (int r = 1; r < R; r++)
        for (int i = 0; i < S; i++) {
            smp[r][i].comm = smp[r][i].transfer = 0;
            smp[r][i].host += 2 * MS;
        }
    assert_int_equal(slowrank_merge(in, R, &rule, &res), 0);
    assert_int_equal(res.split[DATAMSG_SPLIT_NONE], R * S);
    slowrank_result_fini(&res);
}

/* A reply may list one step several times for a rank (the fuzzer's find: a step group larger
 * than the number of ranks overran the scratch space). Every step judged, no fault. */
static void test_repeated_steps(void **state)
{
    (void)state;
    struct slowrank_rule rule = SLOWRANK_RULE_DEFAULT;
    struct slowrank_result res;
    fill_sync(5, 30, NONE, 0, 20000);
    for (int i = 0; i < S; i++)
        smp[0][i].step = 7; /* rank 0 reports step 7 sixty times */
    assert_int_equal(slowrank_merge(in, R, &rule, &res), 0); /* step 7's group: 75 samples, 16 ranks */
    assert_int_equal(res.judged_steps, S);
    assert_int_equal(res.first_step, 1);
    assert_int_equal(res.last_step, S);
    slowrank_result_fini(&res);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sync_causes),
        cmocka_unit_test(test_sync_clean_and_blips),
        cmocka_unit_test(test_unsync_wall),
        cmocka_unit_test(test_repeated_steps),
        cmocka_unit_test(test_failslow_hidden_by_host),
        cmocka_unit_test(test_failslow_link_measured),
        cmocka_unit_test(test_clean_runs_flag_nobody),
        cmocka_unit_test(test_split_sources),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
