// Whole features driven from C through the function table, as a C library
// would use them.

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ctest.h"

// pass_args succeeds with the FutoInArgs it received, as they are.
static void pass_args(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)data;
    bsi->api->success(bsi, (FutoInArgs*)args);
}

void ctest_flow(FutoInAsyncSteps* root, int which)
{
    switch (which) {
    case 1:
        root->api->add(root, NULL, pass_args, NULL);
        break;
    }
}
