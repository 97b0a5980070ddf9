module @jit_program attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<8x7xi1> {mhlo.sharding = "{devices=[2,1,2]<=[4] last_tile_dim_replicate}"}, %arg1: tensor<7x8x8x7xf16> {mhlo.sharding = "{devices=[1,2,1,1,2]<=[4] last_tile_dim_replicate}"}, %arg2: tensor<i32> {mhlo.sharding = "{replicated}"}, %arg3: tensor<i32> {mhlo.sharding = "{replicated}"}, %arg4: tensor<i32> {mhlo.sharding = "{replicated}"}, %arg5: tensor<i32> {mhlo.sharding = "{replicated}"}) -> (tensor<4x1x5x1xf16> {jax.result_info = "result[0]", mhlo.sharding = "{devices=[2,1,1,1,2]<=[4] last_tile_dim_replicate}"}, tensor<i1> {jax.result_info = "result[1]", mhlo.sharding = "{replicated}"}) {
    %0 = stablehlo.compare LT, %arg1, %arg1, FLOAT : (tensor<7x8x8x7xf16>, tensor<7x8x8x7xf16>) -> tensor<7x8x8x7xi1>
    %1 = stablehlo.select %0, %arg1, %arg1 : tensor<7x8x8x7xi1>, tensor<7x8x8x7xf16>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %2 = stablehlo.compare LT, %arg2, %c, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %c_0 = stablehlo.constant dense<7> : tensor<i32>
    %3 = stablehlo.add %arg2, %c_0 : tensor<i32>
    %4 = stablehlo.select %2, %3, %arg2 : tensor<i1>, tensor<i32>
    %c_1 = stablehlo.constant dense<0> : tensor<i32>
    %5 = stablehlo.compare LT, %arg3, %c_1, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %c_2 = stablehlo.constant dense<8> : tensor<i32>
    %6 = stablehlo.add %arg3, %c_2 : tensor<i32>
    %7 = stablehlo.select %5, %6, %arg3 : tensor<i1>, tensor<i32>
    %c_3 = stablehlo.constant dense<0> : tensor<i32>
    %8 = stablehlo.compare LT, %arg3, %c_3, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %c_4 = stablehlo.constant dense<8> : tensor<i32>
    %9 = stablehlo.add %arg3, %c_4 : tensor<i32>
    %10 = stablehlo.select %8, %9, %arg3 : tensor<i1>, tensor<i32>
    %c_5 = stablehlo.constant dense<0> : tensor<i32>
    %11 = stablehlo.compare LT, %arg4, %c_5, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %c_6 = stablehlo.constant dense<7> : tensor<i32>
    %12 = stablehlo.add %arg4, %c_6 : tensor<i32>
    %13 = stablehlo.select %11, %12, %arg4 : tensor<i1>, tensor<i32>
    %14 = stablehlo.dynamic_slice %1, %4, %7, %10, %13, sizes = [4, 1, 5, 1] : (tensor<7x8x8x7xf16>, tensor<i32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<4x1x5x1xf16>
    %15 = stablehlo.compare EQ, %arg4, %arg5, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    return %14, %15 : tensor<4x1x5x1xf16>, tensor<i1>
  }
}
