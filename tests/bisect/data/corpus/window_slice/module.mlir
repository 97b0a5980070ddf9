module @jit_step attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<34x8xf32>, %arg1: tensor<i32>) -> (tensor<4x8xf32> {jax.result_info = "result"}) {
    %0 = call @window(%arg0, %arg1) : (tensor<34x8xf32>, tensor<i32>) -> tensor<30x8xf32>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %1 = stablehlo.compare LT, %arg1, %c, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %c_0 = stablehlo.constant dense<30> : tensor<i32>
    %2 = stablehlo.add %arg1, %c_0 : tensor<i32>
    %3 = stablehlo.select %1, %2, %arg1 : tensor<i1>, tensor<i32>
    %c_1 = stablehlo.constant dense<0> : tensor<i32>
    %4 = stablehlo.dynamic_slice %0, %3, %c_1, sizes = [4, 8] : (tensor<30x8xf32>, tensor<i32>, tensor<i32>) -> tensor<4x8xf32>
    return %4 : tensor<4x8xf32>
  }
  func.func private @window(%arg0: tensor<34x8xf32>, %arg1: tensor<i32>) -> tensor<30x8xf32> {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %0 = stablehlo.compare LT, %arg1, %c, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %c_0 = stablehlo.constant dense<34> : tensor<i32>
    %1 = stablehlo.add %arg1, %c_0 : tensor<i32>
    %2 = stablehlo.select %0, %1, %arg1 : tensor<i1>, tensor<i32>
    %c_1 = stablehlo.constant dense<0> : tensor<i32>
    %3 = stablehlo.dynamic_slice %arg0, %2, %c_1, sizes = [30, 8] : (tensor<34x8xf32>, tensor<i32>, tensor<i32>) -> tensor<30x8xf32>
    return %3 : tensor<30x8xf32>
  }
}
