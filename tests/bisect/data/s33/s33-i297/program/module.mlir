module @jit_program attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<2x17x5x1xi1> {mhlo.sharding = "{replicated}"}, %arg1: tensor<5x32xbf16> {mhlo.sharding = "{replicated}"}, %arg2: tensor<i32> {mhlo.sharding = "{replicated}"}, %arg3: tensor<i32> {mhlo.sharding = "{replicated}"}) -> (tensor<2x17x5x1xi1> {jax.result_info = "result[0]", mhlo.sharding = "{devices=[2,1,1,1,2]<=[4] last_tile_dim_replicate}"}, tensor<2x17x5x1xi1> {jax.result_info = "result[1]", mhlo.sharding = "{devices=[2,1,1,1,2]<=[4] last_tile_dim_replicate}"}, tensor<2x10x3x1xi1> {jax.result_info = "result[2]", mhlo.sharding = "{devices=[2,2,1,1]<=[4]}"}) {
    %0 = stablehlo.custom_call @Sharding(%arg1) {backend_config = "", mhlo.sharding = "{devices=[1,2,2]<=[2,2]T(1,0) last_tile_dim_replicate}"} : (tensor<5x32xbf16>) -> tensor<5x32xbf16>
    %1 = stablehlo.custom_call @SPMDFullToShardShape(%0) {backend_config = "", mhlo.sharding = "{manual}"} : (tensor<5x32xbf16>) -> tensor<5x16xbf16>
    %2 = call @shmap_body(%1) : (tensor<5x16xbf16>) -> tensor<5x16xbf16>
    %3 = stablehlo.custom_call @Sharding(%2) {backend_config = "", mhlo.sharding = "{manual}"} : (tensor<5x16xbf16>) -> tensor<5x16xbf16>
    %4 = stablehlo.custom_call @SPMDShardToFullShape(%3) {backend_config = "", mhlo.sharding = "{devices=[1,2,2]<=[2,2]T(1,0) last_tile_dim_replicate}"} : (tensor<5x16xbf16>) -> tensor<5x32xbf16>
    %5 = stablehlo.iota dim = 2 : tensor<2x17x5x1xi32>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %6 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i32>) -> tensor<2x17x5x1xi32>
    %7 = stablehlo.compare NE, %5, %6, SIGNED : (tensor<2x17x5x1xi32>, tensor<2x17x5x1xi32>) -> tensor<2x17x5x1xi1>
    %8 = stablehlo.custom_call @Sharding(%7) {backend_config = "", mhlo.sharding = "{devices=[2,1,1,1,2]<=[4] last_tile_dim_replicate}"} : (tensor<2x17x5x1xi1>) -> tensor<2x17x5x1xi1>
    %9 = stablehlo.custom_call @SPMDFullToShardShape(%8) {backend_config = "", mhlo.sharding = "{manual}"} : (tensor<2x17x5x1xi1>) -> tensor<1x17x5x1xi1>
    %10 = call @shmap_body_0(%9) : (tensor<1x17x5x1xi1>) -> tensor<2x17x5x1xi1>
    %11 = stablehlo.custom_call @Sharding(%10) {backend_config = "", mhlo.sharding = "{manual}"} : (tensor<2x17x5x1xi1>) -> tensor<2x17x5x1xi1>
    %12 = stablehlo.custom_call @SPMDShardToFullShape(%11) {backend_config = "", mhlo.sharding = "{replicated}"} : (tensor<2x17x5x1xi1>) -> tensor<2x17x5x1xi1>
    %13 = stablehlo.reverse %arg0, dims = [1, 3] : tensor<2x17x5x1xi1>
    %14 = stablehlo.convert %arg2 : (tensor<i32>) -> tensor<ui8>
    %15 = stablehlo.convert %arg3 : (tensor<i32>) -> tensor<ui8>
    %16 = stablehlo.convert %arg3 : (tensor<i32>) -> tensor<ui8>
    %17 = stablehlo.convert %arg3 : (tensor<i32>) -> tensor<ui8>
    %18 = stablehlo.dynamic_slice %arg0, %14, %15, %16, %17, sizes = [2, 10, 3, 1] : (tensor<2x17x5x1xi1>, tensor<ui8>, tensor<ui8>, tensor<ui8>, tensor<ui8>) -> tensor<2x10x3x1xi1>
    return %12, %13, %18 : tensor<2x17x5x1xi1>, tensor<2x17x5x1xi1>, tensor<2x10x3x1xi1>
  }
  func.func private @shmap_body(%arg0: tensor<5x16xbf16>) -> (tensor<5x16xbf16> {jax.result_info = "[None, ('y',)]"}) {
    %0 = "stablehlo.collective_permute"(%arg0) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, source_target_pairs = dense<[[0, 1], [1, 0], [2, 3], [3, 2]]> : tensor<4x2xi64>}> : (tensor<5x16xbf16>) -> tensor<5x16xbf16>
    %1 = "stablehlo.collective_permute"(%0) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, source_target_pairs = dense<[[1, 0], [0, 1], [3, 2], [2, 3]]> : tensor<4x2xi64>}> : (tensor<5x16xbf16>) -> tensor<5x16xbf16>
    return %1 : tensor<5x16xbf16>
  }
  func.func private @shmap_body_0(%arg0: tensor<1x17x5x1xi1>) -> (tensor<2x17x5x1xi1> {jax.result_info = "[None, None, None, None]"}) {
    %0 = "stablehlo.all_gather"(%arg0) <{all_gather_dim = 0 : i64, channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 2], [1, 3]]> : tensor<2x2xi64>, use_global_device_ids}> : (tensor<1x17x5x1xi1>) -> tensor<2x17x5x1xi1>
    return %0 : tensor<2x17x5x1xi1>
  }
}
