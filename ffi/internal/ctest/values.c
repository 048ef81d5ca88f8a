// Values across the interface, and the smaller functions of the table.

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <uchar.h>

#include "ctest.h"

static int cleanups;
static int counters[8];

int ctest_cleanups(void)
{
    return cleanups;
}

void ctest_cleanups_reset(void)
{
    cleanups = 0;
}

int ctest_counter(int i)
{
    return counters[i];
}

void ctest_counters_reset(void)
{
    memset(counters, 0, sizeof(counters));
}

static void count_cleanup(FutoInBinaryValue* v)
{
    (void)v;
    cleanups++;
}

static void free_cleanup(FutoInBinaryValue* v)
{
    free(v->custom_data);
    cleanups++;
}

#define TYPE(name, tag) static const FutoInType name = {(tag), count_cleanup}
TYPE(t_bool, FTN_TYPE_BOOL);
TYPE(t_i8, FTN_TYPE_INT8);
TYPE(t_i16, FTN_TYPE_INT16);
TYPE(t_i32, FTN_TYPE_INT32);
TYPE(t_i64, FTN_TYPE_INT64);
TYPE(t_u8, FTN_TYPE_UINT8);
TYPE(t_u16, FTN_TYPE_UINT16);
TYPE(t_u32, FTN_TYPE_UINT32);
TYPE(t_u64, FTN_TYPE_UINT64);
TYPE(t_f, FTN_TYPE_FLOAT);
TYPE(t_d, FTN_TYPE_DOUBLE);
TYPE(t_s8, FTN_TYPE_STRING);
TYPE(t_s16, FTN_TYPE_STRING16);
TYPE(t_s32, FTN_TYPE_STRING32);
TYPE(t_a_u8, FTN_TYPE_ARRAY | FTN_TYPE_UINT8);
TYPE(t_a_i32, FTN_TYPE_ARRAY | FTN_TYPE_INT32);
TYPE(t_a_d, FTN_TYPE_ARRAY | FTN_TYPE_DOUBLE);
TYPE(t_a_bool, FTN_TYPE_ARRAY | FTN_TYPE_BOOL);
static const FutoInType t_obj = {FTN_TYPE_CUSTOM_OBJECT, free_cleanup};

static const char16_t s16[] = u"h\u00e9llo \U0001F600";
static const char32_t s32[] = U"w\u00f6rld \U0001F680";
static const uint8_t bytes[] = {0, 1, 2, 255};
static const int32_t ints[] = {-1, 2, -3};
static const double doubles[] = {0.5, -2.25};
static const bool bools[] = {true, false, true};
static const uint8_t odd_bools[] = {2, 0, 255}; // BOOL bytes C may hold: any non-zero is true

// emit_step succeeds with a group of values; data selects the group.
static void emit_step(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)args;
    FutoInArgs out;
    memset(&out, 0, sizeof(out));
    switch ((int)(intptr_t)data) {
    case 0:
        out.arg0.type = &t_bool, out.arg0.b = true;
        out.arg1.type = &t_i8, out.arg1.i8 = -8;
        out.arg2.type = &t_i16, out.arg2.i16 = -1600;
        out.arg3.type = &t_i32, out.arg3.i32 = -320000;
        break;
    case 1:
        out.arg0.type = &t_i64, out.arg0.i64 = -6400000000LL;
        out.arg1.type = &t_u8, out.arg1.u8 = 200;
        out.arg2.type = &t_u16, out.arg2.u16 = 60000;
        out.arg3.type = &t_u32, out.arg3.u32 = 4000000000U;
        break;
    case 2:
        out.arg0.type = &t_u64, out.arg0.u64 = 18000000000000000000ULL;
        out.arg1.type = &t_f, out.arg1.f = 1.5f;
        out.arg2.type = &t_d, out.arg2.d = -2.75;
        break;
    case 3:
        out.arg0.type = &t_s8, out.arg0.cstr = "utf-8 \xe2\x9c\x93", out.arg0.length = 9;
        out.arg1.type = &t_s16, out.arg1.cstr16 = s16, out.arg1.length = 8;
        out.arg2.type = &t_s32, out.arg2.cstr32 = s32, out.arg2.length = 0; // NUL-terminated
        out.arg3.type = &t_s8, out.arg3.cstr = "", out.arg3.length = 0;
        break;
    case 4:
        out.arg0.type = &t_a_u8, out.arg0.p = bytes, out.arg0.length = 4;
        out.arg1.type = &t_a_i32, out.arg1.p = ints, out.arg1.length = 3;
        out.arg2.type = &t_a_d, out.arg2.p = doubles, out.arg2.length = 2;
        out.arg3.type = &t_a_bool, out.arg3.p = bools, out.arg3.length = 3;
        break;
    case 6: // BOOL bytes other than 0 and 1
        out.arg0.type = &t_a_bool, out.arg0.p = odd_bools, out.arg0.length = 3;
        out.arg1.type = &t_bool, out.arg1.u8 = 2;
        break;
    case 5: // a custom object, and a hole before it
        out.arg1.type = &t_obj;
        out.arg1.custom_data = malloc(16);
        strcpy((char*)out.arg1.custom_data, "object");
        out.arg1.length = 6;
        break;
    }
    bsi->api->success(bsi, &out);
    if (out.arg0.type || out.arg1.type || out.arg2.type || out.arg3.type) {
        ctest_say("success did not take the values");
    }
}

void ctest_emit(FutoInAsyncSteps* root, int which)
{
    root->api->add(root, (void*)(intptr_t)which, emit_step, NULL);
}

// check_step prints the values a Go step succeeded with.
static void check_step(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)bsi;
    (void)data;
    for (int i = 0; i < 4; i++) {
        const FutoInBinaryValue* v = &args->args[i];
        if (!v->type) {
            ctest_sayf("%d: none", i);
            continue;
        }
        switch (v->type->flags) {
        case FTN_TYPE_INT64:
            ctest_sayf("%d: int64 %lld", i, (long long)v->i64);
            break;
        case FTN_TYPE_UINT64:
            ctest_sayf("%d: uint64 %llu", i, (unsigned long long)v->u64);
            break;
        case FTN_TYPE_DOUBLE:
            ctest_sayf("%d: double %g", i, v->d);
            break;
        case FTN_TYPE_BOOL:
            ctest_sayf("%d: bool %d", i, (int)v->b);
            break;
        case FTN_TYPE_STRING:
            ctest_sayf("%d: string %u %s %d", i, v->length, v->cstr, v->cstr[v->length] == 0);
            break;
        case FTN_TYPE_ARRAY | FTN_TYPE_UINT8: {
            const uint8_t* b = (const uint8_t*)v->p;
            ctest_sayf("%d: bytes %u %d %d", i, v->length, b[0], b[v->length - 1]);
            break;
        }
        case FTN_TYPE_CUSTOM_OBJECT:
            ctest_sayf("%d: object", i);
            break;
        default:
            ctest_sayf("%d: type %d", i, v->type->flags);
        }
    }
}

void ctest_check_args(FutoInAsyncSteps* root)
{
    root->api->add(root, NULL, check_step, NULL);
}

// forward_step passes on what it received, as is.
static void forward_step(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)data;
    FutoInArgs out = *args;
    bsi->api->success(bsi, &out);
}

void ctest_forward(FutoInAsyncSteps* root)
{
    root->api->add(root, NULL, forward_step, NULL);
}

static void* alloc_int(void* data)
{
    (void)data;
    return calloc(1, sizeof(int));
}

static int nested_cleanups;

static void cleanup_int(void* data, void* value)
{
    (void)data;
    nested_cleanups++;
    free(value);
}

// forward_nested_step passes on what it received after stepvm has run C
// code of its own during the call: the cleanup of a state variable of a
// root the step made and frees.
static void forward_nested_step(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)data;
    FutoInAsyncSteps* other = bsi->api->newInstance(bsi);
    other->api->stateVariable(other, NULL, "nested", alloc_int, cleanup_int);
    other->api->free(other);
    FutoInArgs out = *args;
    bsi->api->success(bsi, &out);
}

void ctest_forward_nested(FutoInAsyncSteps* root)
{
    root->api->add(root, NULL, forward_nested_step, NULL);
}

int ctest_nested_cleanups(void)
{
    return nested_cleanups;
}

// kept is a value keep_step holds past its call, which it must not.
static FutoInBinaryValue kept;

static void keep_step(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)data;
    kept = args->arg0;
    bsi->api->success(bsi, NULL);
}

static void pass_kept_step(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)data;
    (void)args;
    FutoInArgs out = {0};
    out.arg0 = kept;
    bsi->api->success(bsi, &out);
}

// ctest_keep adds a step that keeps the first value it receives and
// succeeds with none; ctest_pass_kept one that succeeds with that value.
void ctest_keep(FutoInAsyncSteps* root)
{
    root->api->add(root, NULL, keep_step, NULL);
}

void ctest_pass_kept(FutoInAsyncSteps* root)
{
    root->api->add(root, NULL, pass_kept_step, NULL);
}

// ---------------------------------------------------------------------------
// The smaller functions. counters[] record what ran.

static void stack_cleanup(void* value)
{
    if (strcmp((const char*)value, "stack") == 0) {
        counters[0]++;
    }
}

static void* state_alloc(void* data)
{
    counters[1]++;
    int* p = (int*)calloc(1, sizeof(int));
    *p = (int)(intptr_t)data;
    return p;
}

static void state_cleanup(void* data, void* value)
{
    (void)data;
    counters[2]++;
    free(value);
}

// The state variable of feature 5 counts in counters[4] and [5], apart from
// feature 1's, for tests that collect roots while other tests' loops die.
static void* root_state_alloc(void* data)
{
    (void)data;
    counters[4]++;
    return calloc(1, sizeof(int));
}

static void root_state_cleanup(void* data, void* value)
{
    (void)data;
    counters[5]++;
    free(value);
}

static void sched_cb(void* data)
{
    counters[3] += (int)(intptr_t)data;
}

static FutoInHandle pending;
static FutoInAsyncSteps* new_root;

// ctest_free_new frees the root feature 4 created.
void ctest_free_new(void)
{
    new_root->api->free(new_root);
    new_root = NULL;
}

static void feature_step(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)args;
    FutoInAsyncSteps* r;
    int* v;
    FutoInHandle h;
    switch ((int)(intptr_t)data) {
    case 0: // stack: 16-byte aligned, zeroed, cleaned up when the step ends
        v = (int*)bsi->api->stack(bsi, 64, stack_cleanup);
        ctest_sayf("stack aligned %d zeroed %d", ((uintptr_t)v % 16) == 0, v[15] == 0);
        strcpy((char*)v, "stack");
        bsi->api->add(bsi, NULL, check_step, NULL);
        break;
    case 1: // stateVariable: allocated on first use only
        v = (int*)bsi->api->stateVariable(bsi, (void*)(intptr_t)7, "cvar", state_alloc, state_cleanup);
        ctest_sayf("state %d", (*v)++);
        break;
    case 2: // sched: immediate, deferred, cancel, is_valid
        h = bsi->api->sched_immediate(bsi, (void*)(intptr_t)1, sched_cb);
        ctest_sayf("immediate valid %d", bsi->api->sched_is_valid(bsi, &h));
        pending = bsi->api->sched_deferred(bsi, 5, (void*)(intptr_t)10, sched_cb);
        h = bsi->api->sched_deferred(bsi, 5, (void*)(intptr_t)100, sched_cb);
        bsi->api->sched_cancel(bsi, &h);
        ctest_sayf("canceled valid %d", bsi->api->sched_is_valid(bsi, &h));
        break;
    case 3: // identity and validity
        r = bsi->api->newInstance(bsi);
        ctest_sayf("same thread %d valid %d new valid %d same root %d other root %d",
                bsi->api->is_same_thread(bsi), bsi->api->isValid(bsi), r->api->isValid(r),
                bsi->api->rootId(bsi) == bsi->api->rootId(bsi),
                bsi->api->rootId(bsi) != r->api->rootId(r));
        r->api->free(r);
        ctest_sayf("freed valid %d", r->api->isValid(r));
        break;
    case 4: // a root created from C runs a C step
        r = bsi->api->newInstance(bsi);
        ctest_add_say(r, "new instance runs");
        ctest_features(r, 1);
        r->api->execute(r, NULL, NULL);
        new_root = r;
        break;
    case 5: // a state variable of its own counters, silent
        bsi->api->stateVariable(bsi, NULL, "root-cvar", root_state_alloc, root_state_cleanup);
        break;
    }
}

void ctest_features(FutoInAsyncSteps* root, int which)
{
    root->api->add(root, (void*)(intptr_t)which, feature_step, NULL);
}

// ---------------------------------------------------------------------------
// A step completed from a thread the loop does not know.

static void* thread_main(void* arg)
{
    static const FutoInType str_type = {FTN_TYPE_STRING, NULL};
    FutoInAsyncSteps* bsi = (FutoInAsyncSteps*)arg;
    FutoInArgs out;
    memset(&out, 0, sizeof(out));
    out.arg0.type = &str_type;
    out.arg0.cstr = "from another thread";
    out.arg0.length = 19;
    bsi->api->success(bsi, &out);
    return NULL;
}

static void thread_step(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)data;
    (void)args;
    pthread_t t;
    bsi->api->waitExternal(bsi);
    pthread_create(&t, NULL, thread_main, bsi);
    pthread_detach(t);
}

void ctest_foreign_thread(FutoInAsyncSteps* root)
{
    root->api->add(root, NULL, thread_step, NULL);
}
