// Syntax-check stand-in for <dispatch/dispatch.h>: only what metalx's Metal driver
// uses. Under ARC dispatch objects are Objective-C objects (OS_OBJECT_USE_OBJC).
#pragma once

#include <stddef.h>
#include <stdint.h>

@protocol NSObject;

@protocol OS_dispatch_object <NSObject>
@end
@protocol OS_dispatch_queue <OS_dispatch_object>
@end
@protocol OS_dispatch_queue_attr <OS_dispatch_object>
@end
@protocol OS_dispatch_data <OS_dispatch_object>
@end

typedef NSObject<OS_dispatch_queue>* dispatch_queue_t;
typedef NSObject<OS_dispatch_queue_attr>* dispatch_queue_attr_t;
typedef NSObject<OS_dispatch_data>* dispatch_data_t;
typedef void (^dispatch_block_t)(void);

#define DISPATCH_QUEUE_SERIAL NULL

extern "C" {
dispatch_queue_t dispatch_queue_create(const char* label, dispatch_queue_attr_t attr);
void dispatch_async(dispatch_queue_t queue, dispatch_block_t block);
dispatch_data_t dispatch_data_create(const void* buffer, size_t size, dispatch_queue_t queue,
                                     dispatch_block_t destructor);
}
