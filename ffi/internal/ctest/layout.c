// The layout of every type of FTN12 2.7, field by field, against what the
// specification's C declarations imply on this platform: natural alignment,
// pointers of sizeof(void*), no padding but what alignment requires.

#include <stdalign.h>
#include <stdio.h>
#include <string.h>

#include "ctest.h"

static char report[8192];

#define CHECK(expr)                                                        \
    do {                                                                   \
        if (!(expr)) {                                                     \
            size_t n = strlen(report);                                     \
            snprintf(report + n, sizeof(report) - n, "%s\n", #expr);       \
        }                                                                  \
    } while (0)

#define UP(x, a) (((x) + (a)-1) / (a) * (a))
#define MAX(a, b) ((a) > (b) ? (a) : (b))

typedef void (*fn_t)(void);

const char* ctest_layout(void)
{
    report[0] = 0;
    const size_t P = sizeof(void*);
    const size_t F = sizeof(fn_t);
    const size_t AF = alignof(fn_t);

    /* enum values */
    CHECK(FTN_TYPE_CUSTOM_OBJECT == 0x01 && FTN_TYPE_STRING == 0x02 &&
          FTN_TYPE_STRING16 == 0x03 && FTN_TYPE_STRING32 == 0x04 &&
          FTN_TYPE_BOOL == 0x05 && FTN_TYPE_INT8 == 0x06 && FTN_TYPE_INT16 == 0x07 &&
          FTN_TYPE_INT32 == 0x08 && FTN_TYPE_INT64 == 0x09 && FTN_TYPE_UINT8 == 0x0A &&
          FTN_TYPE_UINT16 == 0x0B && FTN_TYPE_UINT32 == 0x0C && FTN_TYPE_UINT64 == 0x0D &&
          FTN_TYPE_FLOAT == 0x0E && FTN_TYPE_DOUBLE == 0x0F && FTN_BASE_TYPE_MASK == 0x0F &&
          FTN_TYPE_ARRAY == 0x10 && FTN_COMPLEX_TYPE_MASK == 0xF0);
    CHECK(sizeof(FutoInTypeFlags) == 1);

    /* FutoInType */
    CHECK(offsetof(FutoInType, flags) == 0);
    CHECK(offsetof(FutoInType, cleanup) == UP(1, AF));
    CHECK(sizeof(FutoInType) == UP(UP(1, AF) + F, MAX(AF, 1)));

    /* FutoInBinaryValue: the union is as aligned and as large as its
     * largest member among pointers, int64_t, uint64_t and double. */
    const size_t UA = MAX(MAX(alignof(void*), alignof(int64_t)), MAX(alignof(uint64_t), alignof(double)));
    const size_t US = UP(MAX(P, 8), UA);
    const size_t OU = UP(P, UA);
    const size_t OC = UP(OU + US, alignof(void*));
    const size_t OL = OC + P;
    const size_t SA = MAX(UA, MAX(alignof(void*), alignof(uint32_t)));
    CHECK(offsetof(FutoInBinaryValue, type) == 0);
    CHECK(offsetof(FutoInBinaryValue, p) == OU);
    CHECK(offsetof(FutoInBinaryValue, cstr) == OU);
    CHECK(offsetof(FutoInBinaryValue, cstr16) == OU);
    CHECK(offsetof(FutoInBinaryValue, cstr32) == OU);
    CHECK(offsetof(FutoInBinaryValue, b) == OU);
    CHECK(offsetof(FutoInBinaryValue, i8) == OU);
    CHECK(offsetof(FutoInBinaryValue, i16) == OU);
    CHECK(offsetof(FutoInBinaryValue, i32) == OU);
    CHECK(offsetof(FutoInBinaryValue, i64) == OU);
    CHECK(offsetof(FutoInBinaryValue, u8) == OU);
    CHECK(offsetof(FutoInBinaryValue, u16) == OU);
    CHECK(offsetof(FutoInBinaryValue, u32) == OU);
    CHECK(offsetof(FutoInBinaryValue, u64) == OU);
    CHECK(offsetof(FutoInBinaryValue, f) == OU);
    CHECK(offsetof(FutoInBinaryValue, d) == OU);
    CHECK(offsetof(FutoInBinaryValue, custom_data) == OC);
    CHECK(offsetof(FutoInBinaryValue, length) == OL);
    CHECK(sizeof(FutoInBinaryValue) == UP(OL + 4, SA));
    CHECK(sizeof(((FutoInBinaryValue*)0)->length) == 4);

    /* FutoInArgs: arg0..arg3 alias args[0..3] */
    const size_t BV = sizeof(FutoInBinaryValue);
    CHECK(offsetof(FutoInArgs, arg0) == 0);
    CHECK(offsetof(FutoInArgs, arg1) == BV);
    CHECK(offsetof(FutoInArgs, arg2) == 2 * BV);
    CHECK(offsetof(FutoInArgs, arg3) == 3 * BV);
    CHECK(offsetof(FutoInArgs, args) == 0);
    CHECK(sizeof(((FutoInArgs*)0)->args) == 4 * BV);
    CHECK(sizeof(FutoInArgs) == 4 * BV);

    /* FutoInHandle */
    CHECK(offsetof(FutoInHandle, data1) == 0);
    CHECK(offsetof(FutoInHandle, data2) == P);
    CHECK(offsetof(FutoInHandle, data3) == UP(2 * P, alignof(ptrdiff_t)));
    CHECK(sizeof(FutoInHandle) == UP(UP(2 * P, alignof(ptrdiff_t)) + sizeof(ptrdiff_t), MAX(alignof(void*), alignof(ptrdiff_t))));

    /* FutoInAsyncStepsAPI: 25 function pointers in index order, aliased by funcs */
    CHECK(F == P);
    CHECK(offsetof(FutoInAsyncStepsAPI, add) == 0 * P);
    CHECK(offsetof(FutoInAsyncStepsAPI, parallel) == 1 * P);
    CHECK(offsetof(FutoInAsyncStepsAPI, stateVariable) == 2 * P);
    CHECK(offsetof(FutoInAsyncStepsAPI, stack) == 3 * P);
    CHECK(offsetof(FutoInAsyncStepsAPI, success) == 4 * P);
    CHECK(offsetof(FutoInAsyncStepsAPI, handle_error) == 5 * P);
    CHECK(offsetof(FutoInAsyncStepsAPI, setTimeout) == 6 * P);
    CHECK(offsetof(FutoInAsyncStepsAPI, setCancel) == 7 * P);
    CHECK(offsetof(FutoInAsyncStepsAPI, waitExternal) == 8 * P);
    CHECK(offsetof(FutoInAsyncStepsAPI, loop) == 9 * P);
    CHECK(offsetof(FutoInAsyncStepsAPI, repeat) == 10 * P);
    CHECK(offsetof(FutoInAsyncStepsAPI, breakLoop) == 11 * P);
    CHECK(offsetof(FutoInAsyncStepsAPI, continueLoop) == 12 * P);
    CHECK(offsetof(FutoInAsyncStepsAPI, execute) == 13 * P);
    CHECK(offsetof(FutoInAsyncStepsAPI, cancel) == 14 * P);
    CHECK(offsetof(FutoInAsyncStepsAPI, addSync) == 15 * P);
    CHECK(offsetof(FutoInAsyncStepsAPI, rootId) == 16 * P);
    CHECK(offsetof(FutoInAsyncStepsAPI, isValid) == 17 * P);
    CHECK(offsetof(FutoInAsyncStepsAPI, newInstance) == 18 * P);
    CHECK(offsetof(FutoInAsyncStepsAPI, free) == 19 * P);
    CHECK(offsetof(FutoInAsyncStepsAPI, sched_immediate) == 20 * P);
    CHECK(offsetof(FutoInAsyncStepsAPI, sched_deferred) == 21 * P);
    CHECK(offsetof(FutoInAsyncStepsAPI, sched_cancel) == 22 * P);
    CHECK(offsetof(FutoInAsyncStepsAPI, sched_is_valid) == 23 * P);
    CHECK(offsetof(FutoInAsyncStepsAPI, is_same_thread) == 24 * P);
    CHECK(offsetof(FutoInAsyncStepsAPI, funcs) == 0);
    CHECK(sizeof(((FutoInAsyncStepsAPI*)0)->funcs) == 25 * P);
    CHECK(sizeof(FutoInAsyncStepsAPI) == 25 * P);

    /* FutoInAsyncSteps */
    CHECK(offsetof(FutoInAsyncSteps, api) == 0);
    CHECK(sizeof(FutoInAsyncSteps) == P);

    /* FutoInSyncAPI and FutoInSync */
    CHECK(offsetof(FutoInSyncAPI, lock) == 0);
    CHECK(offsetof(FutoInSyncAPI, unlock) == P);
    CHECK(offsetof(FutoInSyncAPI, funcs) == 0);
    CHECK(sizeof(((FutoInSyncAPI*)0)->funcs) == 2 * P);
    CHECK(sizeof(FutoInSyncAPI) == 2 * P);
    CHECK(offsetof(FutoInSync, api) == 0);
    CHECK(sizeof(FutoInSync) == P);

    return report;
}

// ctest_table_complete reports whether every entry of bsi's table is set,
// reading them through funcs, as a binding in another language would.
int ctest_table_complete(FutoInAsyncSteps* bsi)
{
    for (int i = 0; i < 25; i++) {
        if (bsi->api->funcs[i] == NULL) {
            return 0;
        }
    }
    return 1;
}
