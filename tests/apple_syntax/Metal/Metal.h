// Syntax-check stand-in for <Metal/Metal.h>: only the Metal API metalx's driver uses,
// declared from Apple's documentation (developer.apple.com/documentation/metal) with
// the Objective-C selectors and types it gives. Enum values are placeholders.
#pragma once

#import <Foundation/Foundation.h>

// ------------------------------------------------------------------- types and enums

typedef struct {
  NSUInteger width, height, depth;
} MTLSize;

static inline MTLSize MTLSizeMake(NSUInteger width, NSUInteger height, NSUInteger depth) {
  MTLSize s;
  s.width = width;
  s.height = height;
  s.depth = depth;
  return s;
}

typedef NS_OPTIONS(NSUInteger, MTLResourceOptions){
    MTLResourceCPUCacheModeDefaultCache = 0,
    MTLResourceStorageModeShared = 0 << 4,
    MTLResourceStorageModePrivate = 2 << 4,
    MTLResourceHazardTrackingModeDefault = 0 << 8,
};

typedef NS_ENUM(NSUInteger, MTLDispatchType){
    MTLDispatchTypeSerial = 0,
    MTLDispatchTypeConcurrent = 1,
};

typedef NS_ENUM(NSUInteger, MTLCommandBufferStatus){
    MTLCommandBufferStatusNotEnqueued = 0, MTLCommandBufferStatusEnqueued = 1,
    MTLCommandBufferStatusCommitted = 2,   MTLCommandBufferStatusScheduled = 3,
    MTLCommandBufferStatusCompleted = 4,   MTLCommandBufferStatusError = 5,
};

typedef NS_ENUM(NSUInteger, MTLLanguageVersion){
    MTLLanguageVersion2_0 = (2 << 16), MTLLanguageVersion3_0 = (3 << 16),
    MTLLanguageVersion3_1 = (3 << 16) + 1, MTLLanguageVersion3_2 = (3 << 16) + 2,
};

typedef NS_ENUM(NSInteger, MTLMathMode){
    MTLMathModeSafe = 0,
    MTLMathModeRelaxed = 1,
    MTLMathModeFast = 2,
};

typedef NS_ENUM(NSUInteger, MTLFunctionType){
    MTLFunctionTypeVertex = 1,
    MTLFunctionTypeFragment = 2,
    MTLFunctionTypeKernel = 3,
};

typedef NS_ENUM(NSUInteger, MTLDataType){
    MTLDataTypeNone = 0,    MTLDataTypeFloat = 3,  MTLDataTypeHalf = 16,
    MTLDataTypeInt = 29,    MTLDataTypeUInt = 33,  MTLDataTypeShort = 37,
    MTLDataTypeUShort = 41, MTLDataTypeChar = 45,  MTLDataTypeUChar = 49,
    MTLDataTypeBool = 53,   MTLDataTypeLong = 81,  MTLDataTypeULong = 85,
    MTLDataTypeBFloat = 121,
};

typedef NS_OPTIONS(NSUInteger, MTLPipelineOption){
    MTLPipelineOptionNone = 0,
    MTLPipelineOptionArgumentInfo = 1 << 0,
    MTLPipelineOptionBindingInfo = 1 << 0,
    MTLPipelineOptionBufferTypeInfo = 1 << 1,
};

typedef NS_ENUM(NSInteger, MTLBindingType){
    MTLBindingTypeBuffer = 0,
    MTLBindingTypeThreadgroupMemory = 1,
    MTLBindingTypeTexture = 2,
    MTLBindingTypeSampler = 3,
};

// ------------------------------------------------------------------- protocols

@protocol MTLDevice;
@protocol MTLCommandBuffer;
@protocol MTLSharedEvent;
@class MTLCompileOptions;
@class MTLComputePipelineReflection;
@class MTLSharedEventListener;

typedef void (^MTLCommandBufferHandler)(id<MTLCommandBuffer> buffer);
typedef void (^MTLSharedEventNotificationBlock)(id<MTLSharedEvent> event, uint64_t value);

@protocol MTLResource <NSObject>
@property(readonly) id<MTLDevice> device;
@property(copy, atomic) NSString* label;
@end

@protocol MTLBuffer <MTLResource>
@property(readonly) NSUInteger length;
- (void*)contents;
@end

@protocol MTLFunction <NSObject>
@property(readonly) NSString* name;
@property(readonly) MTLFunctionType functionType;
@end

@interface MTLFunctionConstantValues : NSObject
- (void)setConstantValue:(const void*)value type:(MTLDataType)type atIndex:(NSUInteger)index;
- (void)setConstantValue:(const void*)value type:(MTLDataType)type withName:(NSString*)name;
@end

@protocol MTLLibrary <NSObject>
@property(readonly) NSArray<NSString*>* functionNames;
- (id<MTLFunction>)newFunctionWithName:(NSString*)functionName;
- (id<MTLFunction>)newFunctionWithName:(NSString*)name
                        constantValues:(MTLFunctionConstantValues*)constantValues
                                 error:(NSError**)error;
@end

@protocol MTLComputePipelineState <NSObject>
@property(readonly) NSUInteger maxTotalThreadsPerThreadgroup;
@property(readonly) NSUInteger threadExecutionWidth;
@property(readonly) NSUInteger staticThreadgroupMemoryLength;
@end

@protocol MTLBinding <NSObject>
@property(readonly) NSString* name;
@property(readonly) MTLBindingType type;
@property(readonly) NSUInteger index;
@property(readonly, getter=isUsed) BOOL used;
@property(readonly, getter=isArgument) BOOL argument;
@end

@protocol MTLEvent <NSObject>
@property(readonly) id<MTLDevice> device;
@property(copy, atomic) NSString* label;
@end

@protocol MTLSharedEvent <MTLEvent>
@property uint64_t signaledValue;
- (void)notifyListener:(MTLSharedEventListener*)listener
               atValue:(uint64_t)value
                 block:(MTLSharedEventNotificationBlock)block;
- (BOOL)waitUntilSignaledValue:(uint64_t)value timeoutMS:(uint64_t)milliseconds;
@end

@protocol MTLCommandEncoder <NSObject>
@property(readonly) id<MTLDevice> device;
@property(copy, atomic) NSString* label;
- (void)endEncoding;
@end

@protocol MTLComputeCommandEncoder <MTLCommandEncoder>
- (void)setComputePipelineState:(id<MTLComputePipelineState>)state;
- (void)setBuffer:(id<MTLBuffer>)buffer offset:(NSUInteger)offset atIndex:(NSUInteger)index;
- (void)setBytes:(const void*)bytes length:(NSUInteger)length atIndex:(NSUInteger)index;
- (void)setThreadgroupMemoryLength:(NSUInteger)length atIndex:(NSUInteger)index;
- (void)dispatchThreads:(MTLSize)threadsPerGrid threadsPerThreadgroup:(MTLSize)threadsPerThreadgroup;
- (void)dispatchThreadgroups:(MTLSize)threadgroupsPerGrid
       threadsPerThreadgroup:(MTLSize)threadsPerThreadgroup;
@end

@protocol MTLBlitCommandEncoder <MTLCommandEncoder>
- (void)copyFromBuffer:(id<MTLBuffer>)sourceBuffer
          sourceOffset:(NSUInteger)sourceOffset
              toBuffer:(id<MTLBuffer>)destinationBuffer
     destinationOffset:(NSUInteger)destinationOffset
                  size:(NSUInteger)size;
- (void)fillBuffer:(id<MTLBuffer>)buffer range:(NSRange)range value:(uint8_t)value;
@end

@protocol MTLCommandBuffer <NSObject>
@property(readonly) id<MTLDevice> device;
@property(copy, atomic) NSString* label;
@property(readonly) MTLCommandBufferStatus status;
@property(readonly) NSError* error;
@property(readonly) CFTimeInterval GPUStartTime;
@property(readonly) CFTimeInterval GPUEndTime;
- (id<MTLComputeCommandEncoder>)computeCommandEncoder;
- (id<MTLComputeCommandEncoder>)computeCommandEncoderWithDispatchType:(MTLDispatchType)dispatchType;
- (id<MTLBlitCommandEncoder>)blitCommandEncoder;
- (void)encodeWaitForEvent:(id<MTLEvent>)event value:(uint64_t)value;
- (void)encodeSignalEvent:(id<MTLEvent>)event value:(uint64_t)value;
- (void)addScheduledHandler:(MTLCommandBufferHandler)block;
- (void)addCompletedHandler:(MTLCommandBufferHandler)block;
- (void)commit;
- (void)waitUntilCompleted;
@end

@protocol MTLCommandQueue <NSObject>
@property(readonly) id<MTLDevice> device;
@property(copy, atomic) NSString* label;
- (id<MTLCommandBuffer>)commandBuffer;
@end

@protocol MTLDevice <NSObject>
@property(readonly) NSString* name;
@property(readonly) uint64_t registryID;
@property(readonly) MTLSize maxThreadsPerThreadgroup;
@property(readonly) NSUInteger maxThreadgroupMemoryLength;
@property(readonly) BOOL hasUnifiedMemory;
@property(readonly) uint64_t recommendedMaxWorkingSetSize;
@property(readonly) NSUInteger maxBufferLength;
@property(readonly) NSUInteger currentAllocatedSize;
- (id<MTLCommandQueue>)newCommandQueue;
- (id<MTLBuffer>)newBufferWithLength:(NSUInteger)length options:(MTLResourceOptions)options;
- (id<MTLBuffer>)newBufferWithBytesNoCopy:(void*)pointer
                                   length:(NSUInteger)length
                                  options:(MTLResourceOptions)options
                              deallocator:(void (^)(void* pointer, NSUInteger length))deallocator;
- (id<MTLSharedEvent>)newSharedEvent;
- (id<MTLLibrary>)newLibraryWithData:(dispatch_data_t)data error:(NSError**)error;
- (id<MTLLibrary>)newLibraryWithSource:(NSString*)source
                               options:(MTLCompileOptions*)options
                                 error:(NSError**)error;
- (id<MTLComputePipelineState>)newComputePipelineStateWithFunction:(id<MTLFunction>)computeFunction
                                                           options:(MTLPipelineOption)options
                                                        reflection:(MTLComputePipelineReflection**)reflection
                                                             error:(NSError**)error;
@end

// ------------------------------------------------------------------- classes

@interface MTLCompileOptions : NSObject
@property(readwrite, nonatomic) MTLLanguageVersion languageVersion;
@property(readwrite, nonatomic) BOOL fastMathEnabled;
@property(readwrite, nonatomic) MTLMathMode mathMode;
@end

@interface MTLComputePipelineReflection : NSObject
@property(readonly) NSArray<id<MTLBinding>>* bindings;
@end

@interface MTLSharedEventListener : NSObject
- (instancetype)initWithDispatchQueue:(dispatch_queue_t)dispatchQueue;
@property(readonly) dispatch_queue_t dispatchQueue;
@end

// ------------------------------------------------------------------- functions

extern "C" {
id<MTLDevice> MTLCreateSystemDefaultDevice(void);
NSArray<id<MTLDevice>>* MTLCopyAllDevices(void);
}
