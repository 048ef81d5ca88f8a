/* cengine: a tiny FTN12 AsyncSteps engine written in C against
 * futoin/binaryapi.h, the foreign implementation the tests of ffi.Wrap
 * drive. See cengine.c. */
#ifndef STEPVM_CENGINE_H
#define STEPVM_CENGINE_H

#include "futoin/binaryapi.h"

/* The engine. */
FutoInAsyncSteps* cengine_new_root(void);
int cengine_run(void);   /* runs queued events until none is left; returns how many ran */
void cengine_reset(void); /* frees everything: no handle may be used after */
void cengine_free(FutoInAsyncSteps* root); /* root->api->free(root) */
int cengine_result(FutoInAsyncSteps* root, char* code, size_t size); /* 0 running or idle, 1 done, 2 failed, 3 canceled */
int cengine_misuses(void);
void cengine_cancel_twice(int on); /* until reset: cancel handlers are called twice */
const char* cengine_last_misuse(void);
const char* cengine_last_error_info(void); /* the info of the last handle_error call */

/* The trace the tests compare. */
void cengine_say(const char* s);
const char* cengine_trace(void);
void cengine_trace_reset(void);

/* C steps and events for mixed flows. */
void cengine_add_say(FutoInAsyncSteps* bsi, const char* line);
void cengine_add_emit(FutoInAsyncSteps* bsi);
void cengine_add_check(FutoInAsyncSteps* bsi);
void cengine_add_fail(FutoInAsyncSteps* bsi, const char* code);
void cengine_complete_later(FutoInAsyncSteps* bsi, int value);
int cengine_object_cleanups(void);

/* A step that calls sync's lock (then, with unlock, its unlock) itself. */
void cengine_add_lock(FutoInAsyncSteps* bsi, FutoInSync* sync, int unlock);

#endif
