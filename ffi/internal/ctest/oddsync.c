// A FutoInSync implemented in C that misbehaves on request, for the tests
// of Go flows guarded by C primitives: its lock enters by calling success,
// refuses, succeeds twice, queues every caller, adds a step; its unlock
// fails, or hands the section to the oldest waiter. Waiters are told apart
// by the FutoInAsyncSteps their lock came with (a real primitive would use
// rootId: see ffi's cSync), which is enough for the grants the tests make.

#include <string.h>

#include "ctest.h"

typedef struct
{
    FutoInSync base;
    int lock_mode, unlock_mode;
    int locks, unlocks;
    FutoInAsyncSteps* queue[16];
    int queued;
    int held;
} odd_sync;

static void odd_say(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)bsi;
    (void)args;
    ctest_say(data);
}

static void odd_lock(FutoInAsyncSteps* bsi, FutoInSync* sync)
{
    odd_sync* m = (odd_sync*)sync;
    m->locks++;
    switch (m->lock_mode) {
    case CTEST_ODD_LOCK_SUCCESS:
        bsi->api->success(bsi, NULL);
        return;
    case CTEST_ODD_LOCK_WAIT_SUCCESS:
        bsi->api->waitExternal(bsi);
        bsi->api->success(bsi, NULL);
        return;
    case CTEST_ODD_LOCK_REFUSE:
        bsi->api->handle_error(bsi, "Refused", "odd lock refuses");
        return;
    case CTEST_ODD_LOCK_SUCCESS_TWICE:
        bsi->api->success(bsi, NULL);
        bsi->api->success(bsi, NULL);
        return;
    case CTEST_ODD_LOCK_ADD:
        bsi->api->add(bsi, "lock sub-step", odd_say, NULL);
        return;
    case CTEST_ODD_LOCK_MUTEX:
        if (!m->held) {
            m->held = 1;
            return;
        }
        /* fall through */
    case CTEST_ODD_LOCK_QUEUE:
        if (m->queued < 16) {
            m->queue[m->queued++] = bsi;
        }
        bsi->api->waitExternal(bsi);
        return;
    }
}

/* dequeue removes bsi from the queue and reports whether it was there. */
static int dequeue(odd_sync* m, FutoInAsyncSteps* bsi)
{
    for (int i = 0; i < m->queued; i++) {
        if (m->queue[i] == bsi) {
            memmove(&m->queue[i], &m->queue[i + 1], (size_t)(m->queued - i - 1) * sizeof(m->queue[0]));
            m->queued--;
            return 1;
        }
    }
    return 0;
}

static void odd_unlock(FutoInAsyncSteps* bsi, FutoInSync* sync)
{
    odd_sync* m = (odd_sync*)sync;
    m->unlocks++;
    switch (m->unlock_mode) {
    case CTEST_ODD_UNLOCK_FAIL:
        bsi->api->handle_error(bsi, "UnlockFailed", "odd unlock fails");
        return;
    case CTEST_ODD_UNLOCK_HANDOVER:
        if (dequeue(m, bsi)) { /* left while queued */
            return;
        }
        if (m->queued == 0) {
            m->held = 0;
            return;
        }
        FutoInAsyncSteps* next = m->queue[0];
        dequeue(m, next);
        next->api->success(next, NULL);
        return;
    }
}

static const FutoInSyncAPI odd_api = {{{.lock = odd_lock, .unlock = odd_unlock}}};
static odd_sync the_odd = {.base = {&odd_api}};

FutoInSync* ctest_odd_sync(int lock_mode, int unlock_mode)
{
    memset((char*)&the_odd + sizeof(FutoInSync), 0, sizeof(the_odd) - sizeof(FutoInSync));
    the_odd.lock_mode = lock_mode;
    the_odd.unlock_mode = unlock_mode;
    return &the_odd.base;
}

void ctest_odd_counts(int* locks, int* unlocks, int* queued)
{
    *locks = the_odd.locks;
    *unlocks = the_odd.unlocks;
    *queued = the_odd.queued;
}

/* ctest_odd_grant completes the oldest waiter through its FutoInAsyncSteps,
 * which it keeps: a second grant calls it again. */
void ctest_odd_grant(int again)
{
    static FutoInAsyncSteps* last;
    FutoInAsyncSteps* next = last;
    if (!again) {
        if (the_odd.queued == 0) {
            return;
        }
        next = the_odd.queue[0];
        dequeue(&the_odd, next);
        last = next;
    }
    if (next) {
        next->api->success(next, NULL);
    }
}
