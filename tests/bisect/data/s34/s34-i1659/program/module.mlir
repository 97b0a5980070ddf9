module @jit_program attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["x"=2, "y"=2]> {stablehlo.mesh = {axes = [{name = "x", size = 2 : i64}, {name = "y", size = 2 : i64}]}}
  func.func public @main(%arg0: tensor<3x3xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}) -> (tensor<3x3xf32> {jax.result_info = "result[0]", sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}, tensor<3x3xf32> {jax.result_info = "result[1]", sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}, tensor<3x3xf32> {jax.result_info = "result[2]", sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}) {
    %c = stablehlo.constant dense<[0, 1, 2]> : tensor<3xi32>
    %0 = stablehlo.reshape %c : (tensor<3xi32>) -> tensor<3x1xi32>
    %1 = "stablehlo.scatter"(%arg0, %0, %arg0) <{indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, unique_indices = true}> ({
    ^bb0(%arg1: tensor<f32>, %arg2: tensor<f32>):
      stablehlo.return %arg2 : tensor<f32>
    }) : (tensor<3x3xf32>, tensor<3x1xi32>, tensor<3x3xf32>) -> tensor<3x3xf32>
    %2 = sdy.manual_computation(%1) in_shardings=[<@mesh, [{}, {}]>] out_shardings=[<@mesh, [{}, {}]>] manual_axes={"x", "y"} (%arg1: tensor<3x3xf32>) {
      %c_0 = stablehlo.constant dense<1> : tensor<ui32>
      %c_1 = stablehlo.constant dense<2> : tensor<ui32>
      %6 = stablehlo.partition_id : tensor<ui32>
      %7 = stablehlo.divide %6, %c_0 : tensor<ui32>
      %8 = stablehlo.remainder %7, %c_1 : tensor<ui32>
      %9 = stablehlo.convert %8 : (tensor<ui32>) -> tensor<i32>
      %c_2 = stablehlo.constant dense<1> : tensor<i32>
      %10 = stablehlo.compare EQ, %9, %c_2, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %cst = stablehlo.constant dense<0xFF800000> : tensor<f32>
      %11 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<3x3xf32>
      %12 = func.call @_where(%10, %arg1, %11) : (tensor<i1>, tensor<3x3xf32>, tensor<3x3xf32>) -> tensor<3x3xf32>
      %13 = "stablehlo.all_reduce"(%12) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>, use_global_device_ids}> ({
      ^bb0(%arg2: tensor<f32>, %arg3: tensor<f32>):
        %14 = stablehlo.maximum %arg2, %arg3 : tensor<f32>
        stablehlo.return %14 : tensor<f32>
      }) : (tensor<3x3xf32>) -> tensor<3x3xf32>
      sdy.return %13 : tensor<3x3xf32>
    } : (tensor<3x3xf32>) -> tensor<3x3xf32>
    %3 = stablehlo.reverse %arg0, dims = [0] : tensor<3x3xf32>
    %4 = call @cumsum(%3) : (tensor<3x3xf32>) -> tensor<3x3xf32>
    %5 = stablehlo.ceil %arg0 : tensor<3x3xf32>
    return %2, %4, %5 : tensor<3x3xf32>, tensor<3x3xf32>, tensor<3x3xf32>
  }
  func.func private @_where(%arg0: tensor<i1>, %arg1: tensor<3x3xf32>, %arg2: tensor<3x3xf32>) -> tensor<3x3xf32> {
    %0 = stablehlo.select %arg0, %arg1, %arg2 : tensor<i1>, tensor<3x3xf32>
    return %0 : tensor<3x3xf32>
  }
  func.func private @cumsum(%arg0: tensor<3x3xf32>) -> tensor<3x3xf32> {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<f32>
    %1 = "stablehlo.reduce_window"(%arg0, %0) <{base_dilations = array<i64: 1, 1>, padding = dense<[[0, 2], [0, 0]]> : tensor<2x2xi64>, window_dilations = array<i64: 1, 1>, window_dimensions = array<i64: 3, 1>, window_strides = array<i64: 1, 1>}> ({
    ^bb0(%arg1: tensor<f32>, %arg2: tensor<f32>):
      %2 = stablehlo.add %arg1, %arg2 : tensor<f32>
      stablehlo.return %2 : tensor<f32>
    }) : (tensor<3x3xf32>, tensor<f32>) -> tensor<3x3xf32>
    return %1 : tensor<3x3xf32>
  }
}
