#include <string.h>

#include "ctest.h"

// A C step that waits for an external event, as one that started I/O
// would: C keeps its record to complete it later.

static FutoInAsyncSteps* waiting;

static void wait_step(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)data;
    (void)args;
    bsi->api->waitExternal(bsi);
    waiting = bsi;
}

void ctest_add_wait(FutoInAsyncSteps* bsi)
{
    bsi->api->add(bsi, NULL, wait_step, NULL);
}

FutoInAsyncSteps* ctest_waiting(void) { return waiting; }

// ctest_complete completes the step of bsi with success and one string,
// as a C event callback would.
void ctest_complete(FutoInAsyncSteps* bsi, const char* s)
{
    static const FutoInType str_type = {FTN_TYPE_STRING, NULL};
    FutoInArgs out;
    memset(&out, 0, sizeof(out));
    out.arg0.type = &str_type;
    out.arg0.cstr = s;
    out.arg0.length = 0;
    bsi->api->success(bsi, &out);
}

void ctest_fail(FutoInAsyncSteps* bsi, const char* code)
{
    bsi->api->handle_error(bsi, code, NULL);
}

// A step completed from a thread the loop does not know, with a custom
// object: object_cleanups counts the object's cleanups.

#include <pthread.h>

static int object_cleanups;

// The objects pass_object makes carry a serial number in their length,
// 1 to SERIALS-1 round and round, and their cleanups are counted by serial
// too (0: other objects).
static uint32_t object_serial;
#define SERIALS 4096
static int serial_cleanups[SERIALS];

static uint32_t serial_of(uint32_t n)
{
    return 1 + (n - 1) % (SERIALS - 1);
}

static void count_object(FutoInBinaryValue* v)
{
    __atomic_add_fetch(&object_cleanups, 1, __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&serial_cleanups[v->length % SERIALS], 1, __ATOMIC_SEQ_CST);
}

uint32_t ctest_last_object(void)
{
    return serial_of(__atomic_load_n(&object_serial, __ATOMIC_SEQ_CST));
}

int ctest_cleanups_of(uint32_t serial)
{
    return __atomic_load_n(&serial_cleanups[serial % SERIALS], __ATOMIC_SEQ_CST);
}

static const FutoInType obj_type = {FTN_TYPE_CUSTOM_OBJECT, count_object};

static void* object_thread(void* arg)
{
    FutoInAsyncSteps* bsi = (FutoInAsyncSteps*)arg;
    FutoInArgs out;
    memset(&out, 0, sizeof(out));
    out.arg0.type = &obj_type;
    out.arg0.custom_data = (void*)(intptr_t)7;
    out.arg0.length = serial_of(__atomic_add_fetch(&object_serial, 1, __ATOMIC_SEQ_CST));
    bsi->api->success(bsi, &out);
    return NULL;
}

static void object_thread_step(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)data;
    (void)args;
    pthread_t t;
    bsi->api->waitExternal(bsi);
    pthread_create(&t, NULL, object_thread, bsi);
    pthread_detach(t);
}

void ctest_add_object_thread(FutoInAsyncSteps* bsi)
{
    bsi->api->add(bsi, NULL, object_thread_step, NULL);
}

int ctest_object_cleanups(void)
{
    return __atomic_load_n(&object_cleanups, __ATOMIC_SEQ_CST);
}

// A C step that waits and hands its record to a thread of its own, which
// keeps calling isValid, success and handle_error through it long after
// the step has ended (by cancel) and its record has gone to other steps,
// as a late I/O completion would. late_done counts the threads that have
// finished.

static int late_done;

static void* late_thread(void* arg)
{
    static const FutoInType str_type = {FTN_TYPE_STRING, NULL};
    FutoInAsyncSteps* bsi = (FutoInAsyncSteps*)arg;
    for (int i = 0; i < 500; i++) {
        FutoInArgs out;
        memset(&out, 0, sizeof(out));
        out.arg0.type = &str_type;
        out.arg0.cstr = "late";
        bsi->api->isValid(bsi);
        bsi->api->is_same_thread(bsi);
        bsi->api->success(bsi, &out);
        bsi->api->handle_error(bsi, "Late", "from another thread");
    }
    __atomic_add_fetch(&late_done, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

static void late_step(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)data;
    (void)args;
    pthread_t t;
    bsi->api->waitExternal(bsi);
    pthread_create(&t, NULL, late_thread, bsi);
    pthread_detach(t);
}

void ctest_add_late(FutoInAsyncSteps* bsi)
{
    bsi->api->add(bsi, NULL, late_step, NULL);
}

int ctest_late_done(void)
{
    return __atomic_load_n(&late_done, __ATOMIC_SEQ_CST);
}

// Successes that stepvm refuses, with values that must be taken all the
// same: a custom object whose cleanup count_object counts, or the values
// the C step was lent, which stay stepvm's.

static int pass_object(FutoInAsyncSteps* through, FutoInAsyncSteps* bsi)
{
    FutoInArgs out;
    memset(&out, 0, sizeof(out));
    out.arg0.type = &obj_type;
    out.arg0.custom_data = (void*)(intptr_t)7;
    out.arg0.length = serial_of(__atomic_add_fetch(&object_serial, 1, __ATOMIC_SEQ_CST));
    through->api->success(bsi, &out);
    return out.arg0.type == NULL;
}

// pass_bad passes a value of a type the interface does not have, with a
// cleanup count_object counts, as value at, and the others of lent, if
// any.
static int pass_bad(FutoInAsyncSteps* bsi, const FutoInArgs* lent, int at)
{
    static const FutoInType bad_type = {FTN_TYPE_ARRAY | FTN_TYPE_STRING, count_object};
    FutoInArgs out;
    memset(&out, 0, sizeof(out));
    if (lent) {
        out = *lent;
    }
    out.args[at].type = &bad_type;
    bsi->api->success(bsi, &out);
    return out.args[at].type == NULL;
}

int ctest_complete_object(FutoInAsyncSteps* through, FutoInAsyncSteps* bsi)
{
    return pass_object(through, bsi);
}

static FutoInAsyncSteps* refused_target;

static void refused_step(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    int mode = (int)(intptr_t)data;
    if (mode >= 4) {
        ctest_sayf("taken %d", pass_bad(bsi, mode >= 5 ? args : NULL, mode == 6 ? 3 : 0));
        return;
    }
    FutoInAsyncSteps* target = mode & 1 ? refused_target : bsi;
    if (!(mode & 1)) {
        bsi->api->handle_error(bsi, "Failed", "before success");
    }
    if (mode & 2) {
        FutoInArgs out = *args;
        bsi->api->success(target, &out);
        ctest_sayf("lent kept %d", memcmp(&out, args, sizeof(out)) == 0);
    } else {
        ctest_sayf("taken %d", pass_object(bsi, target));
    }
}

void ctest_add_refused_success(FutoInAsyncSteps* bsi, int mode, FutoInAsyncSteps* target)
{
    refused_target = target;
    bsi->api->add(bsi, (void*)(intptr_t)mode, refused_step, NULL);
}
