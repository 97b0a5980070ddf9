module @jit_program attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4xui8> {mhlo.sharding = "{replicated}"}, %arg1: tensor<4xui8> {mhlo.sharding = "{devices=[2,2]<=[4] last_tile_dim_replicate}"}, %arg2: tensor<2x1xi32> {mhlo.sharding = "{devices=[2,1,2]<=[2,2]T(1,0) last_tile_dim_replicate}"}, %arg3: tensor<2xui8> {mhlo.sharding = "{devices=[2,2]<=[2,2]T(1,0) last_tile_dim_replicate}"}, %arg4: tensor<ui8> {mhlo.sharding = "{replicated}"}, %arg5: tensor<1x1xi32> {mhlo.sharding = "{replicated}"}) -> (tensor<bf16> {jax.result_info = "result[0]", mhlo.sharding = "{replicated}"}, tensor<1x1xi32> {jax.result_info = "result[1]", mhlo.sharding = "{replicated}"}, tensor<4xui8> {jax.result_info = "result[2]", mhlo.sharding = "{devices=[2,2]<=[4] last_tile_dim_replicate}"}, tensor<4xui8> {jax.result_info = "result[3]", mhlo.sharding = "{devices=[2,2]<=[2,2]T(1,0) last_tile_dim_replicate}"}) {
    %c = stablehlo.constant dense<0> : tensor<ui8>
    %0 = stablehlo.reduce(%arg0 init: %c) applies stablehlo.add across dimensions = [0] : (tensor<4xui8>, tensor<ui8>) -> tensor<ui8>
    %1 = stablehlo.custom_call @Sharding(%arg1) {backend_config = "", mhlo.sharding = "{replicated}"} : (tensor<4xui8>) -> tensor<4xui8>
    %2 = stablehlo.custom_call @SPMDFullToShardShape(%1) {backend_config = "", mhlo.sharding = "{manual}"} : (tensor<4xui8>) -> tensor<4xui8>
    %3 = call @shmap_body(%2) : (tensor<4xui8>) -> tensor<4xui8>
    %4 = stablehlo.custom_call @Sharding(%3) {backend_config = "", mhlo.sharding = "{manual}"} : (tensor<4xui8>) -> tensor<4xui8>
    %5 = stablehlo.custom_call @SPMDShardToFullShape(%4) {backend_config = "", mhlo.sharding = "{replicated}"} : (tensor<4xui8>) -> tensor<4xui8>
    %6 = stablehlo.multiply %arg0, %5 : tensor<4xui8>
    %7 = stablehlo.convert %arg2 : (tensor<2x1xi32>) -> tensor<2x1xi16>
    %8 = "stablehlo.scatter"(%6, %7, %arg3) <{indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, unique_indices = false}> ({
    ^bb0(%arg6: tensor<ui8>, %arg7: tensor<ui8>):
      %23 = stablehlo.add %arg6, %arg7 : tensor<ui8>
      stablehlo.return %23 : tensor<ui8>
    }) : (tensor<4xui8>, tensor<2x1xi16>, tensor<2xui8>) -> tensor<4xui8>
    %9 = stablehlo.xor %8, %arg0 : tensor<4xui8>
    %c_0 = stablehlo.constant dense<1> : tensor<ui8>
    %10 = stablehlo.reduce(%arg3 init: %c_0) applies stablehlo.multiply across dimensions = [0] : (tensor<2xui8>, tensor<ui8>) -> tensor<ui8>
    %11 = stablehlo.subtract %9, %8 : tensor<4xui8>
    %12 = stablehlo.compare LT, %0, %arg4, UNSIGNED : (tensor<ui8>, tensor<ui8>) -> tensor<i1>
    %13 = stablehlo.convert %12 : (tensor<i1>) -> tensor<bf16>
    %14 = stablehlo.custom_call @Sharding(%arg5) {backend_config = "", mhlo.sharding = "{replicated}"} : (tensor<1x1xi32>) -> tensor<1x1xi32>
    %15 = stablehlo.custom_call @SPMDFullToShardShape(%14) {backend_config = "", mhlo.sharding = "{manual}"} : (tensor<1x1xi32>) -> tensor<1x1xi32>
    %16 = call @shmap_body_0(%15) : (tensor<1x1xi32>) -> tensor<1x1xi32>
    %17 = stablehlo.custom_call @Sharding(%16) {backend_config = "", mhlo.sharding = "{manual}"} : (tensor<1x1xi32>) -> tensor<1x1xi32>
    %18 = stablehlo.custom_call @SPMDShardToFullShape(%17) {backend_config = "", mhlo.sharding = "{replicated}"} : (tensor<1x1xi32>) -> tensor<1x1xi32>
    %19 = stablehlo.convert %18 : (tensor<1x1xi32>) -> tensor<1x1xui8>
    %20 = "stablehlo.gather"(%arg2, %19) <{dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, indices_are_sorted = false, slice_sizes = array<i64: 1, 1>}> : (tensor<2x1xi32>, tensor<1x1xui8>) -> tensor<1x1xi32>
    %21 = call @cummin(%6) : (tensor<4xui8>) -> tensor<4xui8>
    %22 = stablehlo.xor %arg0, %5 : tensor<4xui8>
    return %13, %20, %21, %22 : tensor<bf16>, tensor<1x1xi32>, tensor<4xui8>, tensor<4xui8>
  }
  func.func private @shmap_body(%arg0: tensor<4xui8>) -> (tensor<4xui8> {jax.result_info = "[None]"}) {
    %c = stablehlo.constant dense<1> : tensor<ui32>
    %c_0 = stablehlo.constant dense<2> : tensor<ui32>
    %0 = stablehlo.partition_id : tensor<ui32>
    %1 = stablehlo.divide %0, %c : tensor<ui32>
    %2 = stablehlo.remainder %1, %c_0 : tensor<ui32>
    %3 = stablehlo.convert %2 : (tensor<ui32>) -> tensor<i32>
    %c_1 = stablehlo.constant dense<0> : tensor<i32>
    %4 = stablehlo.compare EQ, %3, %c_1, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %c_2 = stablehlo.constant dense<0> : tensor<ui8>
    %5 = stablehlo.broadcast_in_dim %c_2, dims = [] : (tensor<ui8>) -> tensor<4xui8>
    %6 = call @_where(%4, %arg0, %5) : (tensor<i1>, tensor<4xui8>, tensor<4xui8>) -> tensor<4xui8>
    %7 = "stablehlo.all_reduce"(%6) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>, use_global_device_ids}> ({
    ^bb0(%arg1: tensor<ui8>, %arg2: tensor<ui8>):
      %8 = stablehlo.add %arg1, %arg2 : tensor<ui8>
      stablehlo.return %8 : tensor<ui8>
    }) : (tensor<4xui8>) -> tensor<4xui8>
    return %7 : tensor<4xui8>
  }
  func.func private @_where(%arg0: tensor<i1>, %arg1: tensor<4xui8>, %arg2: tensor<4xui8>) -> tensor<4xui8> {
    %0 = stablehlo.select %arg0, %arg1, %arg2 : tensor<i1>, tensor<4xui8>
    return %0 : tensor<4xui8>
  }
  func.func private @shmap_body_0(%arg0: tensor<1x1xi32>) -> (tensor<1x1xi32> {jax.result_info = "[None, None]"}) {
    %c = stablehlo.constant dense<1> : tensor<ui32>
    %c_0 = stablehlo.constant dense<2> : tensor<ui32>
    %0 = stablehlo.partition_id : tensor<ui32>
    %1 = stablehlo.divide %0, %c : tensor<ui32>
    %2 = stablehlo.remainder %1, %c_0 : tensor<ui32>
    %3 = stablehlo.convert %2 : (tensor<ui32>) -> tensor<i32>
    %c_1 = stablehlo.constant dense<0> : tensor<i32>
    %4 = stablehlo.compare EQ, %3, %c_1, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %c_2 = stablehlo.constant dense<0> : tensor<i32>
    %5 = stablehlo.broadcast_in_dim %c_2, dims = [] : (tensor<i32>) -> tensor<1x1xi32>
    %6 = call @_where_1(%4, %arg0, %5) : (tensor<i1>, tensor<1x1xi32>, tensor<1x1xi32>) -> tensor<1x1xi32>
    %7 = "stablehlo.all_reduce"(%6) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>, use_global_device_ids}> ({
    ^bb0(%arg1: tensor<i32>, %arg2: tensor<i32>):
      %8 = stablehlo.add %arg1, %arg2 : tensor<i32>
      stablehlo.return %8 : tensor<i32>
    }) : (tensor<1x1xi32>) -> tensor<1x1xi32>
    return %7 : tensor<1x1xi32>
  }
  func.func private @_where_1(%arg0: tensor<i1>, %arg1: tensor<1x1xi32>, %arg2: tensor<1x1xi32>) -> tensor<1x1xi32> {
    %0 = stablehlo.select %arg0, %arg1, %arg2 : tensor<i1>, tensor<1x1xi32>
    return %0 : tensor<1x1xi32>
  }
  func.func private @cummin(%arg0: tensor<4xui8>) -> tensor<4xui8> {
    %c = stablehlo.constant dense<255> : tensor<ui8>
    %0 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<ui8>) -> tensor<ui8>
    %1 = "stablehlo.reduce_window"(%arg0, %0) <{base_dilations = array<i64: 1>, padding = dense<[[0, 3]]> : tensor<1x2xi64>, window_dilations = array<i64: 1>, window_dimensions = array<i64: 4>, window_strides = array<i64: 1>}> ({
    ^bb0(%arg1: tensor<ui8>, %arg2: tensor<ui8>):
      %2 = stablehlo.minimum %arg1, %arg2 : tensor<ui8>
      stablehlo.return %2 : tensor<ui8>
    }) : (tensor<4xui8>, tensor<ui8>) -> tensor<4xui8>
    return %1 : tensor<4xui8>
  }
}
